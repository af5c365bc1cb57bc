package changelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
)

// State is what a changelog partition holds: the newest bundle of every key
// that has one (deleted keys absent) and the last marker.
type State struct {
	Bundles map[string]*Bundle
	Marker  *Marker // nil: no checkpoint ever completed
	Records int     // records read
	Bytes   int64   // their value bytes
	Next    int64   // offset of the next record to read
}

// Source is where the changelog lives: the processor's dialer (TLS, SASL)
// and bootstrap brokers.
type Source struct {
	Dialer  *kafka.Dialer // nil = plain TCP
	Brokers []string
	Topic   string
}

// conn dials the leader of partition, trying each broker in turn.
func (s Source) conn(ctx context.Context, partition int) (*kafka.Conn, error) {
	d := s.Dialer
	if d == nil {
		d = &kafka.Dialer{Timeout: 10 * time.Second}
	}
	var errs []error
	for _, b := range s.Brokers {
		c, err := d.DialLeader(ctx, "tcp", b, s.Topic, partition)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("changelog %s/%d: dial leader: %w", s.Topic, partition, errors.Join(errs...))
}

// Fetch sizes: 1 MiB, Kafka's default per-partition fetch, reads a
// partition fastest (larger fetches made the embedded broker's restore of
// 100,000 keys 4-5 times slower). A broker returns a record larger than the
// fetch anyway (KIP-74); for one that returns nothing instead, the size
// doubles up to maxFetchBytes.
const (
	fetchBytes    = 1 << 20
	maxFetchBytes = 256 << 20
)

// scan calls fn for every record of partition from offset from up to the
// high-water mark it had when scan started.
// maxRedials bounds the consecutive reconnections of one scan.
const maxRedials = 5

func (s Source) scan(ctx context.Context, partition int, from func(first, last int64) int64, fn func(m kafka.Message) error) error {
	c, err := s.conn(ctx, partition)
	if err != nil {
		return err
	}
	defer func() { c.Close() }()
	first, last, err := c.ReadOffsets()
	if err != nil {
		return fmt.Errorf("changelog %s/%d: offsets: %w", s.Topic, partition, err)
	}
	off := from(first, last)
	size := fetchBytes
	redials := 0
	for off < last {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := c.Seek(off, kafka.SeekAbsolute); err != nil {
			return fmt.Errorf("changelog %s/%d: seek %d: %w", s.Topic, partition, off, err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a closed conn fails the read below
		b := c.ReadBatch(1, size)
		n := 0
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			n++
			off = m.Offset + 1
			if m.Offset >= last {
				break
			}
			if err := fn(m); err != nil {
				b.Close()
				return err
			}
		}
		err := b.Close()
		switch {
		case n > 0:
			size, redials = fetchBytes, 0
		case err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && redials < maxRedials:
			// The connection failed (a read deadline passed while the
			// restore was busy, the broker closed it): kafka-go does not
			// reuse a failed Conn, so dial again and go on from off.
			redials++
			c.Close()
			if c, err = s.conn(ctx, partition); err != nil {
				return err
			}
		case size < maxFetchBytes:
			size *= 2 // a record larger than the fetch: ask for more
		case err != nil:
			return fmt.Errorf("changelog %s/%d: read at %d: %w", s.Topic, partition, off, err)
		default:
			return fmt.Errorf("changelog %s/%d: read at %d: no record within %d bytes", s.Topic, partition, off, size)
		}
	}
	return nil
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
func NewState() *State { return &State{Bundles: map[string]*Bundle{}} }

// ReadFrom applies the records of partition from st.Next (its log start
// when st.Next is below it) to the partition's end: a state kept by a
// standby (Follow) catches up with what it has not read yet.
func (s Source) ReadFrom(ctx context.Context, partition int, st *State) error {
	return s.scan(ctx, partition, func(first, _ int64) int64 { return max(first, st.Next) }, func(m kafka.Message) error {
		return st.Apply(s.Topic, m)
	})
}

// Apply adds one record of the partition, in offset order: the newest
// bundle of each key, the last marker; a tombstone removes its key.
func (st *State) Apply(topic string, m kafka.Message) error {
	d, err := Decode(m.Key, m.Value)
	if err != nil {
		return fmt.Errorf("changelog %s/%d offset %d: %w", topic, m.Partition, m.Offset, err)
	}
	st.Records++
	st.Bytes += int64(len(m.Value))
	st.Next = m.Offset + 1
	switch {
	case d.Marker != nil:
		st.Marker = d.Marker
	case d.Bundle != nil:
		st.Bundles[string(d.Routing)] = d.Bundle
	default:
		delete(st.Bundles, string(d.Routing))
	}
	return nil
}

// Follow calls fn with the records of partition from offset from on, as
// they are written, until ctx ends (its error is then returned) or fn
// fails. lag, if not nil, is called after each record with the records
// still to read. The records are fetched by a kafka-go Reader (no consumer
// group); a State follows the partition with fn = its Apply.
func (s Source) Follow(ctx context.Context, partition int, from int64, fn func(m kafka.Message) error, lag func(int64)) error {
	cfg := kafka.ReaderConfig{Brokers: s.Brokers, Topic: s.Topic, Partition: partition, Dialer: s.Dialer,
		MinBytes: 1, MaxBytes: fetchBytes, MaxWait: 500 * time.Millisecond, StartOffset: kafka.FirstOffset}
	r := kafka.NewReader(cfg)
	defer r.Close()
	if from > 0 {
		if err := r.SetOffset(from); err != nil {
			return fmt.Errorf("changelog %s/%d: follow from %d: %w", s.Topic, partition, from, err)
		}
	}
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("changelog %s/%d: follow: %w", s.Topic, partition, err)
		}
		if err := fn(m); err != nil {
			return err
		}
		if lag != nil {
			lag(max(m.HighWaterMark-m.Offset-1, 0))
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
	for w := int64(firstWindow); ; w *= 4 {
		w = min(w, tailWindow)
		whole := false
		err = s.scan(ctx, partition, func(first, last int64) int64 {
			whole = last-w <= first
			return max(first, last-w)
		}, func(m kafka.Message) error {
			if len(m.Key) == 1 && m.Key[0] == kindMarker {
				d, err := Decode(m.Key, m.Value)
				if err != nil {
					return fmt.Errorf("changelog %s/%d offset %d: %w", s.Topic, partition, m.Offset, err)
				}
				seq, found = d.Marker.Seq, true
			}
			return nil
		})
		if err != nil || found || whole || w == tailWindow {
			return seq, found, err
		}
	}
}
