// Package engine is eventd's Go API: it owns the store, the actor system and
// the in-memory view of projects, keys and event definitions, and offers the
// operations the HTTP layer needs (authenticate, ingest, read, list, admin).
// Writes go through key and shard actors; reads go to storage directly so
// they never queue behind writes.
package engine
