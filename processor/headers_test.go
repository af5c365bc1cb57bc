package processor

import (
	"reflect"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestPropagatedHeaders(t *testing.T) {
	tp := kafka.Header{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}
	ts := kafka.Header{Key: "TraceState", Value: []byte("congo=t61rcWkgMzE")}
	other := kafka.Header{Key: "x-secret", Value: []byte("no")}
	for _, tc := range []struct {
		allow []string
		in    []kafka.Header
		want  []kafka.Header
	}{
		{nil, []kafka.Header{tp, other}, nil},
		{[]string{"traceparent"}, nil, nil},
		{[]string{"traceparent"}, []kafka.Header{other}, nil},
		{[]string{"traceparent"}, []kafka.Header{other, tp}, []kafka.Header{tp}},
		{[]string{"traceparent", "tracestate"}, []kafka.Header{tp, other, ts}, []kafka.Header{tp, ts}},
	} {
		w := &worker{cfg: &Config{PropagateHeaders: tc.allow}}
		if got := w.propagated(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("allow %v, in %v: got %v, want %v", tc.allow, tc.in, got, tc.want)
		}
	}
}
