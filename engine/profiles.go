package engine

import (
	"errors"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/storage"
)

// Profile is one person of a dataset as GET /profiles/{id} and the admin
// API show it: the traits merged over every id linked to the one asked
// for (last write wins per trait, by the message's timestamp), first and
// last seen over those ids' profiles and events, and the other ids.
type Profile struct {
	ID        string   `json:"id"`
	Traits    rawJSON  `json:"traits"`
	FirstSeen *string  `json:"first_seen"`
	LastSeen  *string  `json:"last_seen"`
	LinkedIDs []string `json:"linked_ids"`
}

// ProfileSummary is one profile key in the admin list: that id's own
// traits and times, not merged with linked ids.
type ProfileSummary struct {
	ID        string  `json:"id"`
	Traits    rawJSON `json:"traits"`
	FirstSeen string  `json:"first_seen"`
	LastSeen  string  `json:"last_seen"`
}

// ProfilePage is one page of the admin profile list.
type ProfilePage struct {
	Data       []ProfileSummary `json:"data"`
	Pagination CursorPagination `json:"pagination"`
}

// CursorPagination pages a list by key: the next page is asked for with
// after=next_after.
type CursorPagination struct {
	Limit     int     `json:"limit"`
	HasMore   bool    `json:"has_more"`
	NextAfter *string `json:"next_after"`
}

// rawJSON is JSON kept as it is, rendered as such by encoding/json.
type rawJSON []byte

// MarshalJSON returns the raw bytes.
func (r rawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("{}"), nil
	}
	return r, nil
}

// AppendJSON appends the profile's JSON object, as the public route sends it.
func (p *Profile) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = event.AppendString(dst, p.ID)
	dst = append(dst, `,"traits":`...)
	dst = append(dst, p.Traits.orEmpty()...)
	dst = append(dst, `,"first_seen":`...)
	dst = appendOptTime(dst, p.FirstSeen)
	dst = append(dst, `,"last_seen":`...)
	dst = appendOptTime(dst, p.LastSeen)
	dst = append(dst, `,"linked_ids":[`...)
	for i, id := range p.LinkedIDs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = event.AppendString(dst, id)
	}
	return append(dst, "]}"...)
}

func (r rawJSON) orEmpty() []byte {
	if len(r) == 0 {
		return []byte("{}")
	}
	return r
}

func appendOptTime(dst []byte, t *string) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = append(dst, *t...)
	return append(dst, '"')
}

// appendTraits renders traits (sorted by key) as one JSON object.
func appendTraits(dst []byte, ts []storage.Trait) []byte {
	dst = append(dst, '{')
	for i, t := range ts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = event.AppendString(dst, t.Key)
		dst = append(dst, ':')
		dst = append(dst, t.Value...)
	}
	return append(dst, '}')
}

func profileOf(sp storage.Profile) Profile {
	out := Profile{ID: sp.ID, Traits: appendTraits(nil, sp.Traits), LinkedIDs: sp.LinkedIDs}
	if sp.HasSeen {
		f, l := msText(sp.FirstSeen), msText(sp.LastSeen)
		out.FirstSeen, out.LastSeen = &f, &l
	}
	if out.LinkedIDs == nil {
		out.LinkedIDs = []string{}
	}
	return out
}

// readProfile reads the person id belongs to in ds; ErrNotFound when id is
// not a visitor id or has neither a profile nor a link.
func (e *Engine) readProfile(ds uint32, id string) (Profile, error) {
	if !event.ValidVisitorID(id) {
		return Profile{}, ErrNotFound
	}
	sp, err := e.db.Profile(ds, id)
	if errors.Is(err, storage.ErrNotFound) {
		return Profile{}, ErrNotFound
	}
	if err != nil {
		return Profile{}, err
	}
	return profileOf(sp), nil
}

// Profile reads the person id belongs to in p's dataset (GET /profiles/{id}).
func (e *Engine) Profile(p *Principal, id string) (Profile, error) {
	return e.readProfile(p.dataset, id)
}

// GetProfile is Profile for the admin API: one environment of a project.
func (e *Engine) GetProfile(projectID, env, id string) (Profile, error) {
	_, ds, err := e.dataset(projectID, env)
	if err != nil {
		return Profile{}, err
	}
	return e.readProfile(ds, id)
}

// ListProfiles pages the profiles of one environment of a project in id
// order (byte order of the UTF-8 id): limit (1-100) profiles with an id
// after `after` ("" from the start).
func (e *Engine) ListProfiles(projectID, env, after string, limit int) (ProfilePage, error) {
	_, ds, err := e.dataset(projectID, env)
	if err != nil {
		return ProfilePage{}, err
	}
	d := map[string]string{}
	if limit < 1 || limit > 100 {
		d["limit"] = "must be an integer from 1 to 100"
	}
	if after != "" && !event.ValidVisitorID(after) {
		d["after"] = event.MsgVisitorID
	}
	if len(d) > 0 {
		return ProfilePage{}, &InputError{Details: d}
	}
	recs, more, err := e.db.ListProfiles(ds, after, limit)
	if err != nil {
		return ProfilePage{}, err
	}
	page := ProfilePage{Data: make([]ProfileSummary, 0, len(recs)), Pagination: CursorPagination{Limit: limit, HasMore: more}}
	for _, r := range recs {
		page.Data = append(page.Data, ProfileSummary{ID: r.ID, Traits: appendTraits(nil, r.Traits),
			FirstSeen: msText(r.FirstSeen), LastSeen: msText(r.LastSeen)})
	}
	if more && len(recs) > 0 {
		next := recs[len(recs)-1].ID
		page.Pagination.NextAfter = &next
	}
	return page, nil
}
