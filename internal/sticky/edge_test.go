package sticky_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/kernelstream/kernelstream/internal/sticky"
)

// userData encodes c as a member's JoinGroup user data.
func userData(t *testing.T, c sticky.Claims) []byte {
	t.Helper()
	data, err := c.UserData()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDeterministic(t *testing.T) {
	run := func(seed int64) sticky.Assignment {
		var members []sticky.Member
		for i := 0; i < 5; i++ {
			c := sticky.Claims{Identity: pod(i)}.WithOwned(map[string][]int{input: {i, i + 5, (i * 7) % 11}}, "")
			members = append(members, sticky.NewMember(fmt.Sprintf("m-%d", 9-i), []string{input, labels}, userData(t, c)))
		}
		rng := rand.New(rand.NewSource(seed))
		parts := map[string][]int{}
		for _, topic := range []string{labels, input} {
			for p := 0; p < 11; p++ {
				parts[topic] = append(parts[topic], p)
			}
			rng.Shuffle(len(parts[topic]), func(i, j int) { parts[topic][i], parts[topic][j] = parts[topic][j], parts[topic][i] })
		}
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		return (&sticky.Planner{}).Assign(members, parts, sticky.Standby{})
	}
	want := run(1)
	for seed := int64(2); seed < 20; seed++ {
		if got := run(seed); !reflect.DeepEqual(got, want) {
			t.Fatalf("input order changed the assignment:\n%v\n%v", got, want)
		}
	}
}

func TestEdgeCases(t *testing.T) {
	parts := func(n int, topics ...string) map[string][]int {
		ps := map[string][]int{}
		for _, topic := range topics {
			for p := 0; p < n; p++ {
				ps[topic] = append(ps[topic], p)
			}
		}
		return ps
	}
	ud := func(identity string, owned ...int) []byte {
		c := sticky.Claims{Identity: identity}
		if owned != nil {
			c = c.WithOwned(map[string][]int{input: owned}, "")
		}
		return userData(t, c)
	}
	restored := func(identity string, parts ...int) []byte {
		return userData(t, sticky.Claims{Identity: identity}.WithRestored(map[string][]int{input: parts}))
	}
	both := []string{input, labels}
	for _, tc := range []struct {
		name       string
		members    []sticky.Member
		partitions map[string][]int
		want       sticky.Assignment
	}{
		{
			name:       "no members",
			partitions: parts(3, input),
			want:       sticky.Assignment{},
		},
		{
			name:       "no partitions",
			members:    []sticky.Member{sticky.NewMember("a", both, ud("p-0"))},
			partitions: nil,
			want:       sticky.Assignment{"a": {}},
		},
		{
			name: "more members than partitions keeps the owner",
			members: []sticky.Member{
				sticky.NewMember("a", both, ud("p-0")),
				sticky.NewMember("b", both, ud("p-1", 0, 1)),
				sticky.NewMember("c", both, ud("p-2")),
			},
			partitions: parts(2, input, labels),
			want: sticky.Assignment{
				"a": {input: {1}, labels: {1}},
				"b": {input: {0}, labels: {0}},
				"c": {},
			},
		},
		{
			name: "unreadable or foreign user data: fair share by member ID",
			members: []sticky.Member{
				sticky.NewMember("b", both, []byte("not json")),
				sticky.NewMember("a", both, []byte(`{"v":99,"id":"p-0","owned":[0,1,2,3]}`)),
			},
			partitions: parts(4, input),
			want: sticky.Assignment{
				"a": {input: {0, 2}},
				"b": {input: {1, 3}},
			},
		},
		{
			name: "duplicate identity: the second member is known by its member ID",
			members: []sticky.Member{
				sticky.NewMember("y", both, ud("p-0", 0, 1, 2, 3)),
				sticky.NewMember("x", both, ud("p-0", 0, 1, 2, 3)),
			},
			partitions: parts(4, input),
			want: sticky.Assignment{
				"x": {input: {0, 1}},
				"y": {input: {2, 3}},
			},
		},
		{
			name: "a member not reading the labels topic gets none of it",
			members: []sticky.Member{
				sticky.NewMember("a", []string{input}, ud("p-0", 0, 1)),
				sticky.NewMember("b", both, ud("p-1", 2, 3)),
			},
			partitions: parts(4, input, labels),
			want: sticky.Assignment{
				"a": {input: {0, 1}},
				"b": {input: {2, 3}, labels: {0, 1, 2, 3}},
			},
		},
		{
			name: "a stale restored claim does not take a partition from its owner within quota",
			members: []sticky.Member{
				sticky.NewMember("a", both, ud("p-0", 0, 1)),
				sticky.NewMember("b", both, ud("p-1", 2, 3)),
				sticky.NewMember("c", both, restored("p-2", 1)),
			},
			partitions: parts(6, input),
			want: sticky.Assignment{
				"a": {input: {0, 1}},
				"b": {input: {2, 3}},
				"c": {input: {4, 5}},
			},
		},
		{
			name: "a restored claim wins over an owner above quota",
			members: []sticky.Member{
				sticky.NewMember("a", both, ud("p-0", 0, 1, 4)),
				sticky.NewMember("b", both, ud("p-1", 2, 3, 5)),
				sticky.NewMember("c", both, restored("p-2", 4, 5)),
			},
			partitions: parts(6, input),
			want: sticky.Assignment{
				"a": {input: {0, 1}},
				"b": {input: {2, 3}},
				"c": {input: {4, 5}},
			},
		},
		{
			name: "claims on partitions that no longer exist are ignored",
			members: []sticky.Member{
				sticky.NewMember("a", both, ud("p-0", 5, 6, 7)),
				sticky.NewMember("b", both, ud("p-1", 1)),
			},
			partitions: parts(2, input),
			want: sticky.Assignment{
				"a": {input: {0}},
				"b": {input: {1}},
			},
		},
		{
			name: "topics nobody reads are not assigned",
			members: []sticky.Member{
				sticky.NewMember("a", []string{input}, ud("p-0")),
			},
			partitions: parts(2, input, "other"),
			want:       sticky.Assignment{"a": {input: {0, 1}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&sticky.Planner{}).Assign(tc.members, tc.partitions, sticky.Standby{})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
