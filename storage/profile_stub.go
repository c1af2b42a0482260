package storage

// TEMPORARY STUB (not committed).
type ProfileUpdate struct {
	ID        string
	Traits    []byte
	Links     []string
	Timestamp int64
}

func (b *Batch) AddProfile(ds uint32, u *ProfileUpdate) {}
