package sticky_test

import (
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/kernelstream/kernelstream/internal/sticky"
)

// standbyPod is one process of the standby tests: what it announces and the
// planner it uses when it leads.
type standbyPod struct {
	claims  sticky.Claims
	planner sticky.Planner
}

// standbyRound runs one rebalance of pods (identity -> process) subscribed to
// the input and the changelog topic standby.Topic (parts partitions each), as
// the engine does (WithOwned with the whole assignment), and returns the
// owner and the standby members of every partition number.
func standbyRound(t *testing.T, pods map[string]*standbyPod, standby sticky.Standby, parts int) (map[int]string, map[int][]string) {
	t.Helper()
	var ids []string
	for id := range pods {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var members []sticky.Member
	partitions := map[string][]int{}
	for p := 0; p < parts; p++ {
		partitions[input] = append(partitions[input], p)
		partitions[standby.Topic] = append(partitions[standby.Topic], p)
	}
	for _, id := range ids {
		members = append(members, sticky.NewMember("m-"+id, []string{input, standby.Topic}, userData(t, pods[id].claims)))
	}
	out := pods[ids[len(ids)-1]].planner.Assign(members, partitions, standby)
	owner, standbys := map[int]string{}, map[int][]string{}
	for _, id := range ids {
		as := out["m-"+id]
		pods[id].claims = pods[id].claims.WithOwned(as, standby.Topic)
		for _, p := range as[input] {
			owner[p] = id
		}
		for _, p := range as[standby.Topic] {
			standbys[p] = append(standbys[p], id)
		}
	}
	if len(owner) != parts {
		t.Fatalf("%d of %d partitions owned: %v", len(owner), parts, owner)
	}
	return owner, standbys
}

// TestStandby: changelog partitions go to members other than the owner, as
// many as asked when there are enough, stay where they are, and a departed
// owner's partitions go to the members that tailed them.
func TestStandby(t *testing.T) {
	for _, tc := range []struct {
		name            string
		members, repl   int
		wantPerPartiton int
	}{
		{"3 members, 1 standby", 3, 1, 1},
		{"4 members, 2 standbys", 4, 2, 2},
		{"2 members, 2 asked", 2, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const parts = 8
			setting := sticky.Standby{Topic: "cl", Replicas: tc.repl}
			pods := map[string]*standbyPod{}
			for i := 0; i < tc.members; i++ {
				pods[pod(i)] = &standbyPod{claims: sticky.Claims{Identity: pod(i)}}
			}
			owner, standby := standbyRound(t, pods, setting, parts)
			check := func(owner map[int]string, standby map[int][]string) {
				t.Helper()
				for p := 0; p < parts; p++ {
					if len(standby[p]) != min(tc.wantPerPartiton, len(pods)-1) {
						t.Fatalf("partition %d: standbys %v, want %d", p, standby[p], tc.wantPerPartiton)
					}
					for _, s := range standby[p] {
						if s == owner[p] {
							t.Fatalf("partition %d: its owner %s is also its standby", p, s)
						}
					}
				}
			}
			check(owner, standby)
			owner2, standby2 := standbyRound(t, pods, setting, parts)
			if !reflect.DeepEqual(owner, owner2) || !reflect.DeepEqual(standby, standby2) {
				t.Fatalf("a rebalance with the same members moved things: %v %v -> %v %v", owner, standby, owner2, standby2)
			}
			if tc.members < 3 {
				return
			}
			gone := owner[0]
			delete(pods, gone)
			owner3, standby3 := standbyRound(t, pods, setting, parts)
			for p := 0; p < parts; p++ {
				if owner[p] == gone && !slices.Contains(standby[p], owner3[p]) {
					t.Errorf("partition %d of the departed %s went to %s, not to a standby %v", p, gone, owner3[p], standby[p])
				}
			}
			check(owner3, standby3)
		})
	}
}
