package event

// TEMPORARY STUB (not committed): replaced by the decoder from h-segdec.

type SegmentType uint8

const (
	SegmentTrack SegmentType = iota + 1
	SegmentPage
	SegmentScreen
	SegmentIdentify
	SegmentGroup
	SegmentAlias
)

func ParseSegmentType(s string) SegmentType { return 0 }

const MaxSegmentMessage = 32 << 10
const MaxSegmentBatch = 500 << 10

type SegmentMessage struct {
	Input       Input
	Type        SegmentType
	UserID      string
	AnonymousID string
	PreviousID  string
	Traits      []byte
	Problem     *Problem
}

func DecodeSegmentMessage(body []byte, typ SegmentType, receivedAtMs int64) (m SegmentMessage, p *Problem) {
	return
}
func DecodeSegmentBatch(body []byte, receivedAtMs int64) (msgs []SegmentMessage, p *Problem) { return }
