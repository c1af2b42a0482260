package engine

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventd/eventd/storage"
)

// Cursor lag on /metrics. Series are labelled by project, environment and
// cursor, so their number is bounded: only connected cursors have them
// (a disconnected cursor's series disappears, the admin listing still has
// its lag), at most maxCursorSeries of them (the first in project,
// environment, name order; eventd_cursor_lag_series_omitted counts the
// rest), and each counts at most metricsLagCap events.
const (
	maxCursorSeries = 100
	metricsLagCap   = 10_000
)

var (
	cursorLagEventsDesc = prometheus.NewDesc("eventd_cursor_lag_events",
		"Events recorded after a connected cursor's acknowledged position (counted up to 10,000).",
		[]string{"project", "environment", "cursor"}, nil)
	cursorLagSecondsDesc = prometheus.NewDesc("eventd_cursor_lag_seconds",
		"Age of the oldest event after a connected cursor's acknowledged position; 0 when caught up.",
		[]string{"project", "environment", "cursor"}, nil)
	cursorsConnectedDesc = prometheus.NewDesc("eventd_cursors_connected",
		"Named cursors with a connected consumer.", nil, nil)
	cursorSeriesOmittedDesc = prometheus.NewDesc("eventd_cursor_lag_series_omitted",
		"Connected cursors without lag series (over the 100-series bound).", nil, nil)
)

// cursorCollector computes the lag of connected cursors at scrape time.
type cursorCollector struct{ e *Engine }

// Describe implements prometheus.Collector.
func (c *cursorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cursorLagEventsDesc
	ch <- cursorLagSecondsDesc
	ch <- cursorsConnectedDesc
	ch <- cursorSeriesOmittedDesc
}

type connectedCursor struct {
	k            cursorKey
	project, env string
	position     storage.ID
}

// Collect implements prometheus.Collector.
func (c *cursorCollector) Collect(ch chan<- prometheus.Metric) {
	r := &c.e.cursors
	r.mu.Lock()
	list := make([]connectedCursor, 0, len(r.conns))
	for k, ent := range r.conns {
		pos, _ := ent.conn.CursorState()
		list = append(list, connectedCursor{k: k, project: ent.projectID, env: ent.env, position: pos})
	}
	r.mu.Unlock()
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.project != b.project {
			return a.project < b.project
		}
		if a.env != b.env {
			return a.env < b.env
		}
		return a.k.name < b.k.name
	})
	ch <- prometheus.MustNewConstMetric(cursorsConnectedDesc, prometheus.GaugeValue, float64(len(list)))
	omitted := max(0, len(list)-maxCursorSeries)
	ch <- prometheus.MustNewConstMetric(cursorSeriesOmittedDesc, prometheus.GaugeValue, float64(omitted))
	if len(list) > maxCursorSeries {
		list = list[:maxCursorSeries]
	}
	head := c.e.Settled()
	now := time.Now()
	for _, cc := range list {
		info, err := c.e.cursorLag(cc.k.ds, cc.position, head, metricsLagCap, now)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(cursorLagEventsDesc, prometheus.GaugeValue, float64(info.LagEvents), cc.project, cc.env, cc.k.name)
		ch <- prometheus.MustNewConstMetric(cursorLagSecondsDesc, prometheus.GaugeValue, info.LagSeconds, cc.project, cc.env, cc.k.name)
	}
}
