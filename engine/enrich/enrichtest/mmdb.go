// Package enrichtest builds a small MaxMind-format database for tests, so
// that no test downloads one.
package enrichtest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Networks are the networks of WriteMMDB's database: country, and the
// subdivision ("" for none) as GeoLite2-City has them.
var Networks = []struct{ CIDR, Country, Subdivision string }{
	{"81.2.69.0/24", "GB", "ENG"},
	{"2.125.160.0/20", "GB", ""},
	{"127.0.0.0/8", "DE", "BE"}, // so requests through the loopback resolve
	{"2001:db8::/32", "US", "CA"},
}

// WriteMMDB writes a GeoLite2-City-shaped database of Networks in a
// temporary directory of t and returns its path.
func WriteMMDB(t testing.TB) string {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-City", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Networks {
		_, network, err := net.ParseCIDR(n.CIDR)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(n.Country)}}
		if n.Subdivision != "" {
			rec["subdivisions"] = mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String(n.Subdivision)}}
		}
		if err := w.Insert(network, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "test.mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
