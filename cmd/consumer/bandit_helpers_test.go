package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// refDecision is what the direct replay decided for one decision record.
type refDecision struct {
	key string
	arm string // the chosen item id
	d   models.Decision
}

// banditRef is the closed click loop run directly: the input records it
// produced (each user's decisions and the delayed rewards of the items
// chosen), what each decision chose, and the final learner states. The
// learners are models.New(spec, key) with Choose/Observe in each user's
// record order, which is exactly what the consumer does with the same
// records, so the same records through the consumer must give the same
// decisions and states.
type banditRef struct {
	msgs      []kafka.Message
	dec       map[string]refDecision // by decision id
	states    map[string][]byte      // MarshalBinary per key
	observed  map[string]uint64      // rewards observed per key
	clicks    int
	decisions int
}

// replayBandit runs n decisions of env through one learner of spec per user.
// The answers come back late and out of order (a seeded shuffle of the open
// decisions), as from a consumer; the users' record sequences do not depend
// on it (banditenv), only the interleaving of users does.
func replayBandit(t *testing.T, env *banditenv.Clicks, n int, spec models.Spec) banditRef {
	t.Helper()
	ref := banditRef{dec: map[string]refDecision{}, states: map[string][]byte{}, observed: map[string]uint64{}}
	s := env.Stream(n)
	learners := map[string]models.Bandit{}
	var order []string
	var open []string
	rng := models.NewRand(5)
	dec := wire.NewDecoder(env.Config().Dim, wire.Limits{})
	var rec banditenv.ClickRecord
	for !s.Done() {
		if !s.Next(&rec) {
			if len(open) == 0 {
				t.Fatalf("click stream blocked with no open decision")
			}
			k := rng.Intn(min(len(open), 8))
			id := open[k]
			open = append(open[:k], open[k+1:]...)
			o, known, err := s.Choose(id, ref.dec[id].arm)
			if err != nil || !known {
				t.Fatalf("Choose(%s): %v %v", id, known, err)
			}
			if o.Click {
				ref.clicks++
			}
			continue
		}
		key := string(rec.Key)
		ref.msgs = append(ref.msgs, kafka.Message{Key: append([]byte(nil), rec.Key...), Value: append([]byte(nil), rec.Value...)})
		l, ok := learners[key]
		if !ok {
			m, err := models.New(spec, key)
			if err != nil {
				t.Fatal(err)
			}
			l = m.(models.Bandit)
			learners[key] = l
			order = append(order, key)
		}
		v, err := dec.Decode(rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Reward {
			d, arm := ref.dec[rec.ID], wire.Token(v.Arm).String()
			if arm != d.arm {
				t.Fatalf("reward of %s names %s, chosen %s", rec.ID, arm, d.arm)
			}
			if err := l.Observe(itemFeatures(t, env, arm), v.Y); err != nil {
				t.Fatalf("%s: Observe: %v", key, err)
			}
			ref.observed[key]++
			continue
		}
		d := l.Choose(v.Arms)
		ref.dec[rec.ID] = refDecision{key: key, arm: wire.Token(v.ArmIDs[d.Arm]).String(), d: d}
		ref.decisions++
		open = append(open, rec.ID)
	}
	for _, k := range order {
		b, err := learners[k].(models.Learner).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ref.states[k] = b
	}
	return ref
}

func itemFeatures(t *testing.T, env *banditenv.Clicks, id string) []float64 {
	t.Helper()
	for i := 0; i < env.Config().Items; i++ {
		if env.ItemID(i) == id {
			return env.Item(i)
		}
	}
	t.Fatalf("no item %s", id)
	return nil
}

// produceMessages writes msgs in order to topic (murmur2 by key, as feed).
func produceMessages(ctx context.Context, t *testing.T, addr, topic string, msgs []kafka.Message) {
	t.Helper()
	w := feed.NewWriter(feed.Target{Brokers: []string{addr}}, topic)
	defer w.Close()
	for len(msgs) > 0 {
		k := min(len(msgs), 1000)
		if err := w.WriteMessages(ctx, msgs[:k]...); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[k:]
	}
}

// checkDecisionOutputs compares every output of topic with the direct
// replay (arm, mean, std, ucb, y_hat to 1e-12, duplicates included) and
// checks that every decision has at least one; it returns the number of
// outputs.
func checkDecisionOutputs(ctx context.Context, t *testing.T, addr, topic string, ref banditRef) int {
	t.Helper()
	msgs, err := broker.ReadAll(ctx, []string{addr}, topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	bad := 0
	for _, m := range msgs {
		var o wire.Output
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatalf("output %s: %v", m.Value, err)
		}
		id := o.ID.String()
		want, ok := ref.dec[id]
		if !ok {
			t.Errorf("output for an unknown decision: %s", m.Value)
			continue
		}
		seen[id] = true
		if err := sameDecision(o, want); err != nil {
			if bad++; bad <= 5 {
				t.Errorf("decision %s: %v\n  output %s", id, err, m.Value)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d outputs differ from the direct replay", bad)
	}
	missing := 0
	for id := range ref.dec {
		if !seen[id] {
			if missing++; missing <= 5 {
				t.Errorf("decision %s has no output", id)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d decisions have no output", missing, len(ref.dec))
	}
	return len(msgs)
}

func sameDecision(o wire.Output, want refDecision) error {
	close := func(p *float64, w float64) bool { return p != nil && math.Abs(*p-w) <= 1e-12 }
	switch {
	case o.Key != want.key:
		return fmt.Errorf("key %q, want %q", o.Key, want.key)
	case o.Arm == nil:
		return fmt.Errorf("no arm, direct replay %s", want.arm)
	case o.Arm.String() != want.arm:
		return fmt.Errorf("arm %s, direct replay %s", o.Arm, want.arm)
	case !close(o.Mean, want.d.Mean) || !close(o.YHat, want.d.Mean):
		return fmt.Errorf("mean %v y_hat %v, direct replay %v", o.Mean, o.YHat, want.d.Mean)
	case !close(o.Std, want.d.Std):
		return fmt.Errorf("std %v, direct replay %v", o.Std, want.d.Std)
	case !close(o.UCB, want.d.UCB):
		return fmt.Errorf("ucb %v, direct replay %v", o.UCB, want.d.UCB)
	}
	return nil
}

// checkBanditStates compares the learners stored in dir (n_updates prefix
// stripped) with the direct replay's states and reward counts.
func checkBanditStates(t *testing.T, dir string, partitions int, ref banditRef) {
	t.Helper()
	got := learnerStatesN(t, dir, partitions)
	if len(got) != len(ref.states) {
		t.Errorf("%d learners stored, direct replay has %d", len(got), len(ref.states))
	}
	for key, want := range ref.states {
		blob, ok := got[key]
		if !ok {
			t.Errorf("learner %s not stored", key)
			continue
		}
		updates, n := binary.Uvarint(blob)
		if n <= 0 {
			t.Errorf("learner %s: bad n_updates prefix", key)
			continue
		}
		if updates != ref.observed[key] {
			t.Errorf("learner %s: %d updates, direct replay observed %d rewards", key, updates, ref.observed[key])
		}
		if string(blob[n:]) != string(want) {
			t.Errorf("learner %s: stored state (%d bytes) differs from the direct replay (%d bytes)", key, len(blob)-n, len(want))
		}
	}
}

// testLogger logs warnings and errors through t (KS_TEST_DEBUG=1: everything).
func testLogger(t *testing.T) zerolog.Logger {
	level := zerolog.WarnLevel
	if os.Getenv("KS_TEST_DEBUG") != "" {
		level = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(level)
}

// caughtUpNonEmpty is caughtUp for streams with few keys, where some
// partitions may hold no record (and so never get a committed offset).
func caughtUpNonEmpty(ctx context.Context, addr, group, topic string, partitions int) (bool, error) {
	return committedEnds(ctx, addr, group, topic, partitions, true)
}
