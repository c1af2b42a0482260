// Package eventjson renders a stored event as the API shows it; the HTTP
// handlers, the stream and webhook bodies share it so that they agree byte
// for byte.
package eventjson

import (
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// Append renders a stored event as the API shows it. full is the form
// of GET /events/{id}, webhook bodies, exports and the stream: with
// properties ({} if a record holds none) and created_at, and without
// visitor_id when the event has none. A list row (full false) leaves both
// out and always has visitor_id, null when there is none.
func Append(dst []byte, e *storage.Event, full bool) []byte {
	dst = append(dst, `{"id":"`...)
	dst = ids.AppendEvent(dst, e.ID)
	dst = append(dst, `","event":`...)
	dst = event.AppendString(dst, e.Name)
	if e.HasVisitor {
		dst = append(dst, `,"visitor_id":`...)
		dst = event.AppendString(dst, e.VisitorID)
	} else if !full {
		dst = append(dst, `,"visitor_id":null`...)
	}
	if full {
		dst = append(dst, `,"properties":`...)
		if len(e.Properties) == 0 {
			dst = append(dst, `{}`...)
		} else {
			dst = append(dst, e.Properties...)
		}
	}
	dst = append(dst, `,"timestamp":"`...)
	dst = event.AppendTime(dst, e.Timestamp)
	if full {
		dst = append(dst, `","created_at":"`...)
		dst = event.AppendTime(dst, e.CreatedAt)
	}
	return append(dst, `"}`...)
}
