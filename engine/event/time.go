package event

import (
	"errors"
	"time"
)

// ErrTimeFormat is returned by ParseTime for text that is not an ISO 8601 date or timestamp.
var ErrTimeFormat = errors.New("event: malformed ISO 8601 timestamp")

// ErrTimeRange is returned by ParseTime for well-formed times outside 1970-01-01 .. 9999-12-31 UTC, which storage keys cannot hold.
var ErrTimeRange = errors.New("event: timestamp outside 1970-01-01 .. 9999-12-31")

// maxTimeMs is 9999-12-31T23:59:59.999Z.
const maxTimeMs = 253402300799999

// parsedTime is ParseTime's result plus what strict RFC 3339 checks need.
type parsedTime struct {
	ms       int64
	dateOnly bool
	rfc3339  bool // full date-time with seconds, 'T' and an explicit zone
}

// ParseTime parses RFC 3339 / ISO 8601 ("2026-01-15T10:30:00Z", offsets like "+02:00", any fraction digits truncated to ms, no zone = UTC, "2026-01-15" date-only at midnight UTC) into Unix ms.
func ParseTime(s string) (ms int64, dateOnly bool, err error) {
	t, err := parseTime(s)
	return t.ms, t.dateOnly, err
}

func digits2[T string | []byte](s T, i int) (int64, bool) {
	if i+2 > len(s) {
		return 0, false
	}
	a, b := s[i]-'0', s[i+1]-'0'
	if a > 9 || b > 9 {
		return 0, false
	}
	return int64(a)*10 + int64(b), true
}

// parseTime works on string and []byte alike so the decoder can parse
// straight from the request body without a conversion allocation.
func parseTime[T string | []byte](s T) (t parsedTime, err error) {
	// Date: YYYY-MM-DD
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return t, ErrTimeFormat
	}
	y1, ok1 := digits2(s, 0)
	y2, ok2 := digits2(s, 2)
	mo, ok3 := digits2(s, 5)
	day, ok4 := digits2(s, 8)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return t, ErrTimeFormat
	}
	year := y1*100 + y2
	if mo < 1 || mo > 12 || day < 1 || day > daysIn(year, mo) {
		return t, ErrTimeFormat
	}
	days := daysFromCivil(year, mo, day)
	if len(s) == 10 {
		t.dateOnly = true
		return t.finish(days * 86400000)
	}

	// Time: [Tt ]hh:mm[:ss[(.|,)fraction]]
	sep := s[10]
	if sep != 'T' && sep != 't' && sep != ' ' {
		return t, ErrTimeFormat
	}
	hh, ok1 := digits2(s, 11)
	mm, ok2 := digits2(s, 14)
	if !ok1 || !ok2 || len(s) < 16 || s[13] != ':' || hh > 23 || mm > 59 {
		return t, ErrTimeFormat
	}
	i := 16
	var ss, frac int64
	hasSeconds := false
	if i < len(s) && s[i] == ':' {
		var ok bool
		if ss, ok = digits2(s, i+1); !ok || ss > 59 {
			return t, ErrTimeFormat
		}
		hasSeconds = true
		i += 3
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			i++
			n := 0
			for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
				if n < 3 {
					frac = frac*10 + int64(s[i]-'0')
				}
				n++
			}
			if n == 0 {
				return t, ErrTimeFormat
			}
			for ; n < 3; n++ {
				frac *= 10
			}
		}
	}

	// Zone: nothing (UTC), Z, or ±hh[[:]mm].
	var offset int64
	hasZone := false
	if i < len(s) {
		switch s[i] {
		case 'Z', 'z':
			i++
		case '+', '-':
			oh, ok := digits2(s, i+1)
			if !ok || oh > 23 {
				return t, ErrTimeFormat
			}
			neg := s[i] == '-'
			i += 3
			var om int64
			if i < len(s) {
				if s[i] == ':' {
					i++
				}
				if om, ok = digits2(s, i); !ok || om > 59 {
					return t, ErrTimeFormat
				}
				i += 2
			}
			offset = (oh*60 + om) * 60000
			if neg {
				offset = -offset
			}
		default:
			return t, ErrTimeFormat
		}
		hasZone = true
	}
	if i != len(s) {
		return t, ErrTimeFormat
	}
	t.rfc3339 = hasZone && hasSeconds && sep != ' '
	return t.finish(days*86400000 + ((hh*60+mm)*60+ss)*1000 + frac - offset)
}

func (t parsedTime) finish(ms int64) (parsedTime, error) {
	if ms < 0 || ms > maxTimeMs {
		return parsedTime{}, ErrTimeRange
	}
	t.ms = ms
	return t, nil
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is Howard Hinnant's algorithm: days since 1970-01-01 of a
// proleptic Gregorian date, without time.Date's normalisation work.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays inverts daysFromCivil for days >= 0 - 719468 (year 0 onwards).
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return
}

// AppendTime appends ms as "2026-01-15T10:30:00.000Z" (UTC, exactly 3 fraction digits), the one format every response uses.
func AppendTime(dst []byte, ms int64) []byte {
	if ms < 0 || ms > maxTimeMs {
		// Outside what the service stores; keep it correct rather than fast.
		return time.UnixMilli(ms).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	}
	days, rem := ms/86400000, ms%86400000
	y, m, d := civilFromDays(days)
	hh, rem := rem/3600000, rem%3600000
	mm, rem := rem/60000, rem%60000
	ss, frac := rem/1000, rem%1000
	var b [24]byte
	b[0] = byte('0' + y/1000)
	b[1] = byte('0' + y/100%10)
	b[2] = byte('0' + y/10%10)
	b[3] = byte('0' + y%10)
	b[4] = '-'
	put2(b[5:], m)
	b[7] = '-'
	put2(b[8:], d)
	b[10] = 'T'
	put2(b[11:], hh)
	b[13] = ':'
	put2(b[14:], mm)
	b[16] = ':'
	put2(b[17:], ss)
	b[19] = '.'
	b[20] = byte('0' + frac/100)
	b[21] = byte('0' + frac/10%10)
	b[22] = byte('0' + frac%10)
	b[23] = 'Z'
	return append(dst, b[:]...)
}

func put2(b []byte, v int64) {
	b[0] = byte('0' + v/10)
	b[1] = byte('0' + v%10)
}
