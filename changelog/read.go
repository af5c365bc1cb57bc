package changelog

import (
	"context"
	"errors"
	"fmt"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// State is what a changelog partition holds: the newest bundle of every key
// that has one and the newest value of every pending entry (deleted ones
// absent), and the last marker.
type State struct {
	Bundles map[string]*Bundle
	Pending map[string][]byte // pending entries by their key
	// Erased are the routing keys, ErasedPending the pending entries,
	// whose latest record read is a tombstone: gone on purpose, not
	// missing (until compaction removes the tombstone too).
	Erased, ErasedPending map[string]struct{}
	Marker                *Marker // nil: no checkpoint ever completed
	Records               int     // records read
	Bytes                 int64   // their value bytes
	Next                  int64   // offset of the next record to read
}

// Source is where the changelog lives: the cluster (read read_committed:
// the processor refuses read_uncommitted with a changelog) and the topic.
type Source struct {
	Cluster kafkaio.Cluster
	Topic   string
}

// maxRestarts bounds how often one scan reads again from its position
// after the client stopped reading the partition (a non-retriable fetch
// error); retriable ones are retried inside the client.
const maxRestarts = 5

// scan calls fn for every record of partition from the offset from picks
// (given the partition's range) up to the end the partition had when scan
// started. The position counts transaction markers and records the
// cleaner removed from a batch's tail (the reader steps over them), so a
// partition whose last offsets hold no record still reads to its end.
func (s Source) scan(ctx context.Context, partition int, from func(r kafkaio.Range) int64, fn func(m *kafkaio.Record) error) error {
	p := int32(partition)
	rg, err := s.Cluster.Offsets(ctx, s.Topic, p)
	if err != nil {
		return fmt.Errorf("changelog %s/%d: offsets: %w", s.Topic, partition, err)
	}
	pos := from(rg)
	if pos >= rg.End {
		return nil
	}
	r := s.Cluster.Read(s.Topic, p, pos)
	defer r.Close()
	gen, restarts := uint64(0), 0
	for pos < rg.End {
		ch, err := next(ctx, r)
		if err != nil {
			return err
		}
		if ch.Gen != gen {
			r.Recycle(ch)
			continue
		}
		if ch.Err != nil {
			var loss *kafkaio.DataLoss
			if errors.As(ch.Err, &loss) || errors.Is(ch.Err, kafkaio.ErrOutOfRange) || restarts == maxRestarts {
				return fmt.Errorf("changelog %s/%d: read at %d: %w", s.Topic, partition, pos, ch.Err)
			}
			restarts++
			gen = r.SetOffset(pos)
			continue
		}
		for i := range ch.Records {
			m := &ch.Records[i]
			if m.Offset >= rg.End {
				break
			}
			if err := fn(m); err != nil {
				r.Recycle(ch)
				return err
			}
			pos = m.Offset + 1
		}
		pos = max(pos, min(ch.Next, rg.End))
		r.Recycle(ch)
	}
	return nil
}

// next waits for r's next chunk until ctx ends.
func next(ctx context.Context, r kafkaio.Reader) (kafkaio.Chunk, error) {
	for {
		if ch, ok := r.Next(); ok {
			return ch, nil
		}
		select {
		case <-r.Ready():
		case <-ctx.Done():
			return kafkaio.Chunk{}, ctx.Err()
		}
	}
}

// Read reads partition to its end: the state a restore starts from.
func (s Source) Read(ctx context.Context, partition int) (*State, error) {
	st := NewState()
	if err := s.ReadFrom(ctx, partition, st); err != nil {
		return nil, err
	}
	return st, nil
}

// NewState returns an empty State (no record read yet).
func NewState() *State { return &State{Bundles: map[string]*Bundle{}, Pending: map[string][]byte{}} }

// ReadFrom applies the records of partition from st.Next (its log start
// when st.Next is below it) to the partition's end: a state kept by a
// standby (Follow) catches up with what it has not read yet.
func (s Source) ReadFrom(ctx context.Context, partition int, st *State) error {
	var end int64
	err := s.scan(ctx, partition, func(r kafkaio.Range) int64 {
		end = r.End
		return max(r.Start, st.Next)
	}, st.Apply)
	if err == nil && st.Next < end {
		st.Next = end // the end was markers or a cleaned tail
	}
	return err
}

// Apply adds one record of the partition, in offset order: the newest
// bundle of each key, the last marker; a tombstone removes its key.
func (st *State) Apply(m *kafkaio.Record) error {
	d, err := Decode(m.Key, m.Value)
	if err != nil {
		return fmt.Errorf("changelog %s/%d offset %d: %w", m.Topic, m.Partition, m.Offset, err)
	}
	st.Records++
	st.Bytes += int64(len(m.Value))
	st.Next = m.Offset + 1
	switch {
	case d.Marker != nil:
		st.Marker = d.Marker
	case d.Bundle != nil:
		st.Bundles[string(d.Routing)] = d.Bundle
		delete(st.Erased, string(d.Routing))
	case d.Pending != nil:
		st.Pending[string(d.PendingKey)] = d.Pending.Value
		delete(st.ErasedPending, string(d.PendingKey))
	case d.PendingKey != nil:
		delete(st.Pending, string(d.PendingKey))
		if st.ErasedPending == nil {
			st.ErasedPending = map[string]struct{}{}
		}
		st.ErasedPending[string(d.PendingKey)] = struct{}{}
	default:
		delete(st.Bundles, string(d.Routing))
		if st.Erased == nil {
			st.Erased = map[string]struct{}{}
		}
		st.Erased[string(d.Routing)] = struct{}{}
	}
	return nil
}

// Follow calls fn with the records of partition from offset from on, as
// they are written, until ctx ends (its error is then returned) or fn
// fails. lag, if not nil, is called after each chunk with the records
// still to read; at, if not nil, with the position reached past markers.
// A state follows the partition with fn = its Apply.
func (s Source) Follow(ctx context.Context, partition int, from int64, fn func(m *kafkaio.Record) error, lag func(int64)) error {
	if from <= 0 {
		from = kafkaio.Start
	}
	r := s.Cluster.Read(s.Topic, int32(partition), from)
	defer r.Close()
	for {
		ch, err := next(ctx, r)
		if err != nil {
			return err
		}
		if ch.Err != nil {
			return fmt.Errorf("changelog %s/%d: follow: %w", s.Topic, partition, ch.Err)
		}
		pos := ch.Next
		for i := range ch.Records {
			if err := fn(&ch.Records[i]); err != nil {
				r.Recycle(ch)
				return err
			}
			pos = max(pos, ch.Records[i].Offset+1)
		}
		r.Recycle(ch)
		if lag != nil {
			lag(max(ch.StableOffset-pos, 0))
		}
	}
}

// tailWindow is how far back LastSeq looks for a marker before it gives up
// (a checkpoint writes one marker after its bundles, so the last marker is
// normally the last record). firstWindow is where it starts: the window
// grows fourfold while it holds no marker, so the usual lookup reads a few
// records, not the bundles of a whole checkpoint (each up to a learner's
// size).
const (
	tailWindow  = 4096
	firstWindow = 16
)

// LastSeq returns the sequence number of the partition's last marker, found
// among its last records; found is false when the partition is empty or
// holds no marker there (the caller then reads it all).
func (s Source) LastSeq(ctx context.Context, partition int) (seq uint64, found bool, err error) {
	seq, _, found, err = s.LastMarker(ctx, partition)
	return seq, found, err
}

// LastMarker is LastSeq with the marker's offset.
func (s Source) LastMarker(ctx context.Context, partition int) (seq uint64, offset int64, found bool, err error) {
	for w := int64(firstWindow); ; w *= 4 {
		w = min(w, tailWindow)
		whole := false
		err = s.scan(ctx, partition, func(r kafkaio.Range) int64 {
			whole = r.End-w <= r.Start
			return max(r.Start, r.End-w)
		}, func(m *kafkaio.Record) error {
			if len(m.Key) == 1 && m.Key[0] == kindMarker {
				d, err := Decode(m.Key, m.Value)
				if err != nil {
					return fmt.Errorf("changelog %s/%d offset %d: %w", s.Topic, partition, m.Offset, err)
				}
				seq, offset, found = d.Marker.Seq, m.Offset, true
			}
			return nil
		})
		if err != nil || found || whole || w == tailWindow {
			return seq, offset, found, err
		}
	}
}
