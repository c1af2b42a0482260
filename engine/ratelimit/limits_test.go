package ratelimit

import (
	"encoding/json"
	"testing"
)

func TestPlanLimits(t *testing.T) {
	tests := []struct {
		plan   string
		want   Limits
		wantOK bool
	}{
		{"free", Limits{100, 5000, 50000}, true},
		{"professional", Limits{500, 25000, 250000}, true},
		{"enterprise", Limits{2000, 100000, 1000000}, true},
		{"", Limits{}, false},
		{"Free", Limits{}, false},
		{"gold", Limits{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.plan, func(t *testing.T) {
			got, ok := PlanLimits(tt.plan)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("PlanLimits(%q) = %+v, %v; want %+v, %v", tt.plan, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestTenth(t *testing.T) {
	tests := []struct {
		name string
		in   Limits
		want Limits
	}{
		{"free", Limits{100, 5000, 50000}, Limits{10, 500, 5000}},
		{"professional", Limits{500, 25000, 250000}, Limits{50, 2500, 25000}},
		{"enterprise", Limits{2000, 100000, 1000000}, Limits{200, 10000, 100000}},
		{"rounds down", Limits{109, 55, 19}, Limits{10, 5, 1}},
		{"at least one", Limits{1, 9, 3}, Limits{1, 1, 1}},
		{"zero stays unlimited", Limits{0, 30, 0}, Limits{0, 3, 0}},
		{"negative is unlimited", Limits{-5, 0, 0}, Limits{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Tenth(); got != tt.want {
				t.Errorf("%+v.Tenth() = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestLimitsJSON(t *testing.T) {
	b, err := json.Marshal(Limits{Minute: 1, Hour: 2, Day: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"minute":1,"hour":2,"day":3}`; got != want {
		t.Errorf("json = %s, want %s", got, want)
	}
}

func TestAnalyticsLimits(t *testing.T) {
	if want := (Limits{Minute: 50}); Analytics != want {
		t.Errorf("Analytics = %+v, want %+v", Analytics, want)
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		k    Kind
		want string
	}{
		{Standard, "standard"},
		{Batch, "batch"},
		{AnalyticsKind, "analytics"},
		{None, "none"},
		{Kind(9), "Kind(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.k.String(); got != tt.want {
				t.Errorf("Kind(%d).String() = %q, want %q", tt.k, got, tt.want)
			}
		})
	}
}
