package propnums

import (
	"fmt"
	"strings"
	"testing"
)

// member is one entry of an index as Each gives it.
type member struct{ key, num string }

// index builds obj's index from members at the given offsets.
func index(t *testing.T, obj string, offs ...[4]int) []byte {
	t.Helper()
	var r Recorder
	for _, o := range offs {
		r.Add(o[0], o[1], o[2], o[3])
	}
	idx := r.AppendTo(nil, len(obj))
	if len(idx) != r.Len() {
		t.Fatalf("AppendTo appended %d bytes, Len says %d", len(idx), r.Len())
	}
	return idx
}

func each(obj string, idx []byte, stopAt int) ([]member, bool) {
	var got []member
	ok := Each([]byte(obj), idx, func(key, num []byte) bool {
		got = append(got, member{string(key), string(num)})
		return len(got) != stopAt
	})
	return got, ok
}

func TestEach(t *testing.T) {
	const obj = `{"a":1,"s":"x","bb":-2.5e3}`
	good := [][4]int{{2, 3, 5, 6}, {16, 18, 20, 26}}
	tests := []struct {
		name   string
		obj    string
		idx    []byte
		stopAt int
		want   []member
		ok     bool
	}{
		{"all", obj, index(t, obj, good...), 0, []member{{"a", "1"}, {"bb", "-2.5e3"}}, true},
		{"fn stops", obj, index(t, obj, good...), 1, []member{{"a", "1"}}, true},
		{"none", obj, index(t, obj), 0, nil, true},
		{"another length", obj + " ", index(t, obj, good...), 0, nil, false},
		{"nil", obj, nil, 0, nil, false},
		{"cut", obj, index(t, obj, good...)[:9], 0, nil, false},
		{"key not quoted", obj, index(t, obj, [4]int{3, 4, 5, 6}), 0, nil, false},
		{"value past the object", obj, index(t, obj, [4]int{2, 3, 5, 27}), 0, nil, false},
		{"value before the key's end", obj, index(t, obj, [4]int{2, 3, 3, 6}), 0, nil, false},
		{"empty value", obj, index(t, obj, [4]int{2, 3, 5, 5}), 0, nil, false},
		{"good, then bad", obj, index(t, obj, [4]int{2, 3, 5, 6}, [4]int{0, 3, 5, 6}), 0, []member{{"a", "1"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := each(tt.obj, tt.idx, tt.stopAt)
			if ok != tt.ok || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Each = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestRecorderBounds: keys past MaxKeyLen and members past MaxMembers are
// left out, as the rollups leave them out; an object too long for 2-byte
// offsets gets no index.
func TestRecorderBounds(t *testing.T) {
	var r Recorder
	r.Add(2, 2+MaxKeyLen+1, 200, 201) // too long a key
	for i := range MaxMembers + 3 {
		r.Add(2+i, 3+i, 5+i, 6+i)
	}
	if got, want := r.Len(), 2+8*MaxMembers; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	if len(r.AppendTo(nil, 1<<16)) != 0 {
		t.Errorf("an object of 65,536 bytes got an index")
	}
	r.Reset()
	if r.Len() != 2 {
		t.Errorf("Len after Reset = %d, want 2", r.Len())
	}
	long := `{"` + strings.Repeat("k", MaxKeyLen) + `":7}`
	got, ok := each(long, index(t, long, [4]int{2, 2 + MaxKeyLen, 4 + MaxKeyLen, 5 + MaxKeyLen}), 0)
	if !ok || len(got) != 1 || got[0].num != "7" {
		t.Errorf("a key of MaxKeyLen bytes: %v, %v", got, ok)
	}
}
