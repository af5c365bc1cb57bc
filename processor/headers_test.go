package processor

import (
	"reflect"
	"testing"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

func TestPropagatedHeaders(t *testing.T) {
	tp := kafkaio.Header{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}
	ts := kafkaio.Header{Key: "TraceState", Value: []byte("congo=t61rcWkgMzE")}
	other := kafkaio.Header{Key: "x-secret", Value: []byte("no")}
	for _, tc := range []struct {
		allow []string
		in    []kafkaio.Header
		want  []kafkaio.Header
	}{
		{nil, []kafkaio.Header{tp, other}, nil},
		{[]string{"traceparent"}, nil, nil},
		{[]string{"traceparent"}, []kafkaio.Header{other}, nil},
		{[]string{"traceparent"}, []kafkaio.Header{other, tp}, []kafkaio.Header{tp}},
		{[]string{"traceparent", "tracestate"}, []kafkaio.Header{tp, other, ts}, []kafkaio.Header{tp, ts}},
	} {
		w := &worker{cfg: &Config{PropagateHeaders: tc.allow}}
		if got := w.propagated(nil, tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("allow %v, in %v: got %v, want %v", tc.allow, tc.in, got, tc.want)
		}
	}
}
