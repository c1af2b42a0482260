package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"time"

	"github.com/eventd/eventd/http/client"
)

// Send one event and wait for the server to have it on disk.
func ExampleClient_Track() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("EVENTD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := c.Track(ctx, client.Event{
		Name:       "purchase",
		VisitorID:  "v_123",
		Properties: map[string]any{"amount": 19.9, "currency": "EUR"},
		// Your own key makes your own retries (say, of a job) safe as well.
		IdempotencyKey: "order-8812",
	})
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == 422:
		log.Printf("rejected: %s %v", apiErr.Message, apiErr.Details)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("stored", ev.ID)
	}
}

// Fire and forget from a request handler: Enqueue never blocks, and Close
// sends what is left when the program stops.
func ExampleClient_Enqueue() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("EVENTD_KEY"),
		client.WithFlushInterval(2*time.Second),
		client.WithErrorHandler(func(err error, lost []client.Event) {
			log.Printf("eventd: %d events not stored: %v", len(lost), err)
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	if err := c.Enqueue(client.Event{Name: "signup", VisitorID: "v_123"}); errors.Is(err, client.ErrQueueFull) {
		log.Print("eventd is not keeping up; event dropped")
	}
}

// Walk every page of a filtered list.
func ExampleClient_All() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("EVENTD_SECRET_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	since := time.Now().Add(-24 * time.Hour)
	for ev, err := range c.All(context.Background(), client.ListParams{Event: "purchase", From: since}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.ID, ev.VisitorID, ev.Timestamp.Format(time.RFC3339))
	}
}

// Follow the live feed; a dropped connection resumes where it stopped.
func ExampleClient_Stream() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("EVENTD_SECRET_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.Stream(ctx, client.StreamParams{Events: []string{"purchase", "refund"}})
	if err != nil {
		log.Fatal(err) // a bad key or filter: *client.Error
	}
	defer st.Close()
	for ev := range st.Events() {
		fmt.Println(ev.ID, ev.Name, ev.Properties["amount"])
	}
	if err := st.Err(); err != nil {
		log.Print(err) // the key was revoked, say
	}
}

// Analytics returns a typed result: the field named by Type is set.
func ExampleClient_Analytics() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("EVENTD_SECRET_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Analytics(context.Background(), url.Values{
		"type": {"timeseries"}, "event": {"purchase"}, "metric": {"sum"}, "property": {"amount"}, "interval": {"day"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range res.Timeseries.Data {
		fmt.Printf("%s %.2f\n", p.Timestamp.Format(time.DateOnly), p.Value)
	}
	fmt.Printf("total %.2f\n", res.Timeseries.Total)
}

// How much of the key's limit is left.
func ExampleClient_RateLimit() {
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("EVENTD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	rl, err := c.RateLimit(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if m := rl.Limits.Minute; m != nil {
		fmt.Printf("%s plan: %d of %d left this minute (full again at %s)\n", rl.Plan, m.Remaining, m.Limit, m.ResetTime().Format(time.Kitchen))
	}
}
