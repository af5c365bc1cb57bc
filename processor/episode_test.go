package processor

import (
	"errors"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestBriefWriteErrors(t *testing.T) {
	refused := errors.New("dial tcp: connection refused")
	we := make(kafka.WriteErrors, 300)
	for i := range we {
		if i > 0 {
			we[i] = refused
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"plain", refused, "dial tcp: connection refused"},
		{"write errors", we, "299 of 300 messages not written, the first: dial tcp: connection refused"},
		{"wrapped", errors.Join(errors.New("emit"), we), "299 of 300 messages not written, the first: dial tcp: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := briefWriteErrors(tc.err)
			if got.Error() != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if strings.Count(got.Error(), "refused") != 1 {
				t.Errorf("the cause is repeated: %q", got)
			}
			if !errors.Is(got, refused) {
				t.Errorf("%v does not wrap the cause", got)
			}
		})
	}
}
