// Package actors holds eventd's actor behaviours on protoactor-go:
//
//   - a key actor per API key in use: rate-limit windows, idempotency, then
//     forwarding writes to a shard;
//   - N shard actors: each drains what has queued up into one Pebble batch,
//     commits it with fsync and answers every waiter (group commit);
//   - a broadcaster: told of every committed batch, it fans events out to
//     live subscribers without ever blocking a shard, and forwards batches
//     to consumer actors;
//   - a goals actor: a consumer that evaluates goals after commit.
//
// Handlers talk to actors with a message carrying a buffered reply channel
// instead of RequestFuture, which costs a process registration and a timer
// per call. Messages never carry fasthttp buffers: everything is copied.
package actors
