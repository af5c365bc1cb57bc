package processor

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/changelog"
)

// idleStream is stream(6, 14, 3, seed) with event times 20 s apart: user-1
// is silent long enough to expire and comes back, user-2 stops for good,
// and the only record of key "late" comes 40 minutes late.
func idleStream(base int64) []testRecord {
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	var out []testRecord
	for i, r := range stream(6, 14, 3, 47) {
		ts := base + int64(i)*20_000
		switch i {
		case 80:
			// A new key's first record comes late: its clock is the
			// watermark, not its ts (with its ts it would expire at once,
			// before its second record).
			out = append(out, testRecord{key: "late", value: fmt.Sprintf(`{"ts":%d,"id":"l1","x":[1,2,3],"y":1}`, ts-40*60_000), time: at(ts)})
		case 90:
			out = append(out, testRecord{key: "late", value: fmt.Sprintf(`{"ts":%d,"id":"l2","x":[3,2,1],"y":2}`, ts), time: at(ts)})
		}
		switch {
		case r.key == "user-1" && i >= 30 && i < 90, r.key == "user-2" && i >= 50:
			continue
		}
		r.value = fmt.Sprintf(`{"ts":%d,`, ts) + strings.TrimPrefix(r.value, "{")
		r.time = at(ts) // the log's time keeps up with ts: the watermark follows ts
		out = append(out, r)
	}
	return out
}

// idleReference applies the documented rule independently of the
// processor: when a record moves the watermark, every key whose last record
// (the watermark then) is more than ttl behind is forgotten; a record with
// x (re)starts its key. It returns the records that shape the final states
// and the number of expiries.
func idleReference(t *testing.T, recs []testRecord, ttl int64) ([]testRecord, int) {
	t.Helper()
	w := int64(math.MinInt64)
	last := map[string]int64{}
	since := map[string][]testRecord{}
	expired := 0
	for _, r := range recs {
		var ts int64
		if _, err := fmt.Sscanf(r.value, `{"ts":%d,`, &ts); err != nil {
			t.Fatal(err)
		}
		if ts > w {
			w = ts
			for k, l := range last {
				if l < w-ttl {
					delete(last, k)
					since[k] = nil
					expired++
				}
			}
		}
		_, known := last[r.key]
		if known || strings.Contains(r.value, `"x":`) {
			last[r.key] = w
		}
		since[r.key] = append(since[r.key], r)
	}
	var keep []testRecord
	for _, r := range recs { // original order, only what follows each key's last expiry
		if s := since[r.key]; len(s) > 0 && s[0] == r {
			since[r.key] = s[1:]
			keep = append(keep, r)
		}
	}
	return keep, expired
}

// TestKeyTTL: idle keys expire by event time, deterministically: the
// checkpointed states equal a direct replay of only the records after each
// key's last expiry, with or without a restart from Badger or a restore
// from the changelog in the middle, and whether pending entries have to be
// searched (LabelsTTL above KeyTTL) or are already gone.
func TestKeyTTL(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Minute
	for _, tc := range []struct {
		name      string
		labelsTTL time.Duration
		restart   string
	}{
		{"uninterrupted", time.Hour, ""},
		{"labels ttl below key ttl", 5 * time.Minute, ""},
		{"restart from badger", time.Hour, "badger"},
		{"restore from the changelog", time.Hour, "changelog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tune := func(c *Config) { c.KeyTTL, c.LabelsTTL = ttl, tc.labelsTTL }
			ts := newTester(t, lmsSpec, tune)
			recs := idleStream(ts.base.UnixMilli())
			keep, wantExpired := idleReference(t, recs, ttl.Milliseconds())
			if wantExpired < 2 || len(keep) == len(recs) {
				t.Fatalf("the stream expires %d keys: the test needs expiries", wantExpired)
			}
			half := len(recs) / 2
			ts.consume(recs[:half]...)
			expired := ts.w.p.Stats().KeysExpired
			if tc.restart == "" {
				expired = 0 // the same counters go on
			}
			switch tc.restart {
			case "badger":
				dir := ts.close()
				ts = newTester(t, lmsSpec, func(c *Config) { tune(c); c.CheckpointDir = dir })
				ts.next[tIn] = ts.w.nextIn
			case "changelog":
				ts.w.p.cfg.Changelog.Topic = "cl" // the tester has no broker to restore from
				st := changelogState(t, ts)
				ts = newTester(t, lmsSpec, tune)
				if err := ts.w.applyChangelog(st); err != nil {
					t.Fatal(err)
				}
				if err := ts.w.restore(-1, -1); err != nil {
					t.Fatal(err)
				}
				ts.next[tIn] = ts.w.nextIn
			}
			ts.consume(recs[half:]...)
			expired += ts.w.p.Stats().KeysExpired
			if expired != int64(wantExpired) {
				t.Errorf("%d keys expired, want %d", expired, wantExpired)
			}
			checkStates(t, replay(t, lmsSpec, keep, DefaultTopK), ts.close())
		})
	}
}

// changelogState is the changelog a tester's first checkpoint writes.
func changelogState(t *testing.T, ts *tester) *changelog.State {
	t.Helper()
	snap, err := ts.w.takeSnapshot()
	if err != nil || snap == nil {
		t.Fatal(snap, err)
	}
	st := &changelog.State{Bundles: map[string]*changelog.Bundle{}}
	for _, m := range snap.changelog {
		d, err := changelog.Decode(m.Key, m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if d.Marker != nil {
			st.Marker = d.Marker
		} else if d.Bundle != nil {
			st.Bundles[string(d.Routing)] = d.Bundle
		}
	}
	return st
}

// TestKeyTTLTurnedOff: a restart without KeyTTL drops the stored idle-key
// index, so that turning it on again later starts every clock afresh
// instead of expiring keys by times that were not kept up.
func TestKeyTTLTurnedOff(t *testing.T) {
	t.Parallel()
	ts := newTester(t, lmsSpec, func(c *Config) { c.KeyTTL = time.Hour })
	ts.consume(stream(3, 4, 3, 48)...)
	dir := ts.close()
	count := func(ts *tester) int {
		n := 0
		if err := ts.store.EachIdle(0, func(k, v []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ts = newTester(t, lmsSpec, func(c *Config) { c.KeyTTL = time.Hour; c.CheckpointDir = dir })
	if n := count(ts); n != 3 {
		t.Fatalf("%d idle-index entries stored, want 3", n)
	}
	dir = ts.close()
	ts = newTester(t, lmsSpec, func(c *Config) { c.CheckpointDir = dir })
	if n := count(ts); n != 0 {
		t.Fatalf("%d idle-index entries left with KeyTTL off, want 0", n)
	}
}
