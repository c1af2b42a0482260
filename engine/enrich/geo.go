package enrich

import "net/netip"

// geoRecord is the part of a GeoLite2 / DB-IP Lite City or Country record
// that enrichment reads.
type geoRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	Subdivisions []struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"subdivisions"`
}

// lookupGeo returns the ISO 3166-1 alpha-2 country and the ISO 3166-2
// code of the first (largest) subdivision, e.g. "GB" and "GB-ENG"; ""
// when the database does not know the address or has no subdivisions.
func (e *Enricher) lookupGeo(ip netip.Addr) (country, region string) {
	var rec geoRecord
	res := e.geo.Lookup(ip.Unmap())
	if !res.Found() || res.Decode(&rec) != nil {
		return "", ""
	}
	country = rec.Country.ISOCode
	if country != "" && len(rec.Subdivisions) > 0 && rec.Subdivisions[0].ISOCode != "" {
		region = country + "-" + rec.Subdivisions[0].ISOCode
	}
	return country, region
}
