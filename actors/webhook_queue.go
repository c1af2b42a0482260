package actors

import (
	"bytes"

	"github.com/eventd/eventd/storage"
)

// pendItem is a delivery waiting for, or in, an attempt.
type pendItem struct {
	id       storage.ID
	nextAt   int64
	step     uint8
	index    int // in the endpoint's heap; -1 when not queued
	inflight bool
	test     chan replyDelivery // test deliveries: told of their single attempt
}

type pendHeap []*pendItem

func (h pendHeap) Len() int { return len(h) }

func (h pendHeap) Less(i, j int) bool {
	if h[i].nextAt != h[j].nextAt {
		return h[i].nextAt < h[j].nextAt
	}
	return bytes.Compare(h[i].id[:], h[j].id[:]) < 0
}

func (h pendHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }

func (h *pendHeap) Push(x any) { it := x.(*pendItem); it.index = len(*h); *h = append(*h, it) }

func (h *pendHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.index = -1
	return it
}
