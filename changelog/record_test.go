package changelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, b := range []*Bundle{
		{Seq: 7, NextIn: 1234, NextLab: -2, Learner: []byte{1, 2, 3}, Pending: []Entry{{Key: []byte("k/1"), Value: []byte("v1")}, {Key: []byte("k/2"), Value: []byte{}}}},
		{Seq: 1, NextIn: 0, NextLab: 0},
		{Seq: 1 << 40, NextIn: 1 << 50, NextLab: 3, Learner: []byte{}},
		{Seq: 2, NextIn: 9, NextLab: 4, Learner: []byte{5}, HasLastRecord: true, LastRecord: -1 << 40}, // version 2
	} {
		v := EncodeBundle(nil, b)
		d, err := Decode(BundleKey([]byte("user-7")), v)
		if err != nil {
			t.Fatal(err)
		}
		if string(d.Routing) != "user-7" || d.Marker != nil || !reflect.DeepEqual(d.Bundle, b) {
			t.Errorf("round trip: got %+v, want %+v", d.Bundle, b)
		}
		// Appended behind other bytes (records cut from one buffer), the
		// value is the same.
		prefix := []byte("earlier records")
		if got := EncodeBundle(prefix, b)[len(prefix):]; !bytes.Equal(got, v) {
			t.Errorf("EncodeBundle behind %d bytes differs from EncodeBundle(nil)", len(prefix))
		}
		if got := AppendBundleKey(prefix, []byte("user-7"))[len(prefix):]; !bytes.Equal(got, BundleKey([]byte("user-7"))) {
			t.Errorf("AppendBundleKey = %q", got)
		}
	}
	m := &Marker{Seq: 9, Meta: []byte("meta")}
	d, err := Decode(MarkerKey(), EncodeMarker(nil, m))
	if err != nil || !reflect.DeepEqual(d.Marker, m) || d.Bundle != nil {
		t.Fatalf("marker round trip: %+v, %v", d, err)
	}
	if got := EncodeMarker([]byte{1, 2}, m)[2:]; !bytes.Equal(got, EncodeMarker(nil, m)) {
		t.Errorf("EncodeMarker behind 2 bytes differs from EncodeMarker(nil)")
	}
	d, err = Decode(BundleKey([]byte("gone")), nil)
	if err != nil || d.Bundle != nil || d.Marker != nil || string(d.Routing) != "gone" {
		t.Fatalf("tombstone: %+v, %v", d, err)
	}
}

func TestRecordRejections(t *testing.T) {
	good := EncodeBundle(nil, &Bundle{Seq: 3, NextIn: 5, Learner: []byte("L"), Pending: []Entry{{Key: []byte("a"), Value: []byte("b")}}})
	flip := append([]byte(nil), good...)
	flip[6] ^= 1
	v2marker := EncodeMarker(nil, &Marker{Seq: 1})
	v2marker[2] = codecIdle // only bundles have a version 2 (checksum fixed below)
	v2marker = binary.LittleEndian.AppendUint32(v2marker[:len(v2marker)-4], crc32.Checksum(v2marker[:len(v2marker)-4], castagnoli))
	for _, tc := range []struct {
		name       string
		key, value []byte
	}{
		{"empty key", nil, good},
		{"unknown kind", []byte("Zx"), good},
		{"bit flip", BundleKey([]byte("k")), flip},
		{"truncated", BundleKey([]byte("k")), good[:len(good)-1]},
		{"marker value under a bundle key", BundleKey([]byte("k")), EncodeMarker(nil, &Marker{Seq: 1})},
		{"marker tombstone", MarkerKey(), nil},
		{"long marker key", []byte("MM"), EncodeMarker(nil, &Marker{Seq: 1})},
		{"foreign bytes", BundleKey([]byte("k")), bytes.Repeat([]byte{0xff}, 20)},
		{"version 2 marker", MarkerKey(), v2marker},
	} {
		if _, err := Decode(tc.key, tc.value); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", tc.name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(BundleKey([]byte("k")), EncodeBundle(nil, &Bundle{Seq: 3, NextIn: 5, Learner: []byte("L"), Pending: []Entry{{Key: []byte("a"), Value: []byte("b")}}}))
	f.Add(BundleKey([]byte("k")), EncodeBundle(nil, &Bundle{Seq: 3, NextIn: 5, HasLastRecord: true, LastRecord: 77}))
	f.Add(MarkerKey(), EncodeMarker(nil, &Marker{Seq: 2, Meta: []byte{1, 2}}))
	f.Add([]byte{kindBundle}, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		d, err := Decode(key, value)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		switch {
		case d.Bundle != nil:
			if got := EncodeBundle(nil, d.Bundle); !bytes.Equal(got, value) {
				t.Fatalf("bundle re-encodes differently")
			}
		case d.Marker != nil:
			if got := EncodeMarker(nil, d.Marker); !bytes.Equal(got, value) {
				t.Fatalf("marker re-encodes differently")
			}
		}
	})
}
