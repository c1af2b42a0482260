package actors

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// deliveryRecord is a delivery as the log stores it (JSON under the D prefix).
type deliveryRecord struct {
	ID            string          `json:"id"`
	WebhookID     string          `json:"webhook_id"`
	Type          string          `json:"type"`
	Status        string          `json:"status"`
	CreatedAt     string          `json:"created_at"`
	EventCount    int             `json:"event_count,omitempty"`
	NextAttemptAt *string         `json:"next_attempt_at"`
	Attempts      []Attempt       `json:"attempts"`
	Test          bool            `json:"test,omitempty"` // a test send: one attempt, no retries
	Payload       json.RawMessage `json:"payload"`
}

// Delivery is one delivery as the admin API shows it: the last attempt's
// outcome in short, and every attempt in AttemptLog.
type Delivery struct {
	ID             string    `json:"id"`
	WebhookID      string    `json:"webhook_id"`
	Type           string    `json:"type"`
	Status         string    `json:"status"`
	Attempts       int       `json:"attempts"`
	ResponseStatus *int      `json:"response_status"`
	Error          *string   `json:"error"`
	CreatedAt      string    `json:"created_at"`
	LastAttemptAt  *string   `json:"last_attempt_at"`
	NextAttemptAt  *string   `json:"next_attempt_at"`
	EventCount     int       `json:"event_count,omitempty"`
	Test           bool      `json:"test,omitempty"`
	AttemptLog     []Attempt `json:"attempt_log"`
}

func (r *deliveryRecord) view() Delivery {
	d := Delivery{ID: r.ID, WebhookID: r.WebhookID, Type: r.Type, Status: r.Status, Attempts: len(r.Attempts),
		CreatedAt: r.CreatedAt, NextAttemptAt: r.NextAttemptAt, EventCount: r.EventCount, Test: r.Test, AttemptLog: r.Attempts}
	if d.AttemptLog == nil {
		d.AttemptLog = []Attempt{}
	}
	if n := len(r.Attempts); n > 0 {
		last := r.Attempts[n-1]
		d.LastAttemptAt = &last.At
		if last.Status != 0 {
			d.ResponseStatus = &last.Status
		}
		if last.Error != "" {
			d.Error = &last.Error
		}
	}
	return d
}

// Attempt is one HTTP request of a delivery.
type Attempt struct {
	At        string `json:"at"`
	Status    int    `json:"status"` // HTTP status; 0 when no response came
	LatencyMs int64  `json:"latency_ms"`
	Response  string `json:"response"` // first KiB of the response body
	Error     string `json:"error,omitempty"`
}

// DecodeDelivery reads a stored delivery record into its admin view.
func DecodeDelivery(rec []byte) (Delivery, error) {
	r, err := decodeRecord(rec)
	return r.view(), err
}

func decodeRecord(rec []byte) (deliveryRecord, error) {
	var r deliveryRecord
	err := json.Unmarshal(rec, &r)
	return r, err
}

// FormatMsgID renders a delivery id: "msg_" and 26 Crockford base32 characters.
func FormatMsgID(id storage.ID) string { return "msg_" + ids.FormatEvent(id)[len(ids.EventPrefix):] }

// ParseMsgID reads a delivery id.
func ParseMsgID(s string) (storage.ID, error) {
	rest, ok := strings.CutPrefix(s, "msg_")
	if !ok {
		return storage.ID{}, ids.ErrMalformed
	}
	return ids.ParseEvent(ids.EventPrefix + rest)
}

// SignWebhook computes the Standard Webhooks webhook-signature header: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key, space-separated.
func SignWebhook(keys [][]byte, msgID, timestamp string, body []byte) string {
	var b strings.Builder
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(msgID))
		m.Write([]byte{'.'})
		m.Write([]byte(timestamp))
		m.Write([]byte{'.'})
		m.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return b.String()
}

// derivedID is a delivery id that is the same whenever the same thing is
// announced: ms as its time part, a hash of parts as the rest.
func derivedID(ms int64, parts ...string) storage.ID {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	id := storage.IDAt(ms)
	copy(id[6:], sum[:10])
	return id
}

// appendEnvelope writes {"id":..,"type":..,"created_at":..,"data": and leaves the object open.
func appendEnvelope(dst []byte, msg, kind string, ms int64) []byte {
	dst = append(dst, `{"id":`...)
	dst = event.AppendString(dst, msg)
	dst = append(dst, `,"type":`...)
	dst = event.AppendString(dst, kind)
	dst = append(dst, `,"created_at":"`...)
	dst = event.AppendTime(dst, ms)
	return append(dst, `","data":`...)
}

func msText(ms int64) string { return string(event.AppendTime(nil, ms)) }
