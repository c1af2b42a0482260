package actors

// Secret is one signing key of an endpoint: the decoded base64 part of its whsec_ text.
type Secret struct {
	Key       []byte
	ExpiresAt int64 // Unix ms after which it no longer signs; 0 never
}

// WebhookConfig is one endpoint as the shards and the webhook actor see it.
// The engine builds it and never changes a published one.
type WebhookConfig struct {
	ID            string
	Dataset       uint32
	URL           string
	Test          bool // test environment: loopback and private addresses are reachable
	EventCreated  bool
	GoalCompleted bool
	UsageAlert    bool
	EventNames    map[string]struct{} // nil: every event name
	Enabled       bool
	Secrets       []Secret
}

func (c *WebhookConfig) matches(name string) bool {
	if c.EventNames == nil {
		return true
	}
	_, ok := c.EventNames[name]
	return ok
}

// WebhookSet is an immutable snapshot of every endpoint, indexed for the shards.
type WebhookSet struct {
	byID   map[string]*WebhookConfig
	byDS   map[uint32][]*WebhookConfig
	events map[uint32][]*WebhookConfig // enabled endpoints that want event.created
}

// NewWebhookSet indexes endpoints; the configs must not change afterwards.
func NewWebhookSet(list []*WebhookConfig) *WebhookSet {
	s := &WebhookSet{byID: map[string]*WebhookConfig{}, byDS: map[uint32][]*WebhookConfig{}, events: map[uint32][]*WebhookConfig{}}
	for _, c := range list {
		s.byID[c.ID] = c
		s.byDS[c.Dataset] = append(s.byDS[c.Dataset], c)
		if c.Enabled && c.EventCreated {
			s.events[c.Dataset] = append(s.events[c.Dataset], c)
		}
	}
	return s
}
