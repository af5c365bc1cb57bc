package sticky_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kernelstream/kernelstream/internal/sticky"
)

// TestUserDataBytes pins the wire format: a group runs members of several
// releases at once during a rolling upgrade, and each reads the others' user
// data, so these bytes must not change without a new version.
func TestUserDataBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims sticky.Claims
		want   string
	}{
		{"no identity, no claims", sticky.Claims{}, `{"v":1}`},
		{"fresh process: identity only", sticky.Claims{Identity: "kernelstream-3"}, `{"v":1,"id":"kernelstream-3"}`},
		{"restored", sticky.Claims{Identity: "kernelstream-3", Restored: []int{1, 4}}, `{"v":1,"id":"kernelstream-3","restored":[1,4]}`},
		{"owned", sticky.Claims{Identity: "kernelstream-3", Owned: []int{2, 7}}, `{"v":1,"id":"kernelstream-3","owned":[2,7]}`},
		{"owns nothing (known)", sticky.Claims{Identity: "kernelstream-3", Owned: []int{}}, `{"v":1,"id":"kernelstream-3","owned":[]}`},
		{"every tier", sticky.Claims{Identity: "p", Owned: []int{0, 3}, Restored: []int{5}, Standby: []int{1, 2}},
			`{"v":1,"id":"p","owned":[0,3],"restored":[5],"standby":[1,2]}`},
		// The scoring address: a field of version 1 that older members
		// ignore (TestParseUserData's unknown fields), so no new version.
		{"scoring address", sticky.Claims{Identity: "p", Owned: []int{1}, Addr: "10.0.0.7:8081"},
			`{"v":1,"id":"p","owned":[1],"addr":"10.0.0.7:8081"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.claims.UserData()
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.want {
				t.Fatalf("UserData %s, want %s", data, tc.want)
			}
			back, err := sticky.ParseUserData(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tc.claims) {
				t.Fatalf("parsed back %#v, want %#v", back, tc.claims)
			}
		})
	}
}

// TestParseUserData: what a leader makes of user data it cannot use.
func TestParseUserData(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       sticky.Claims
		wantErr    string // "" = no error
	}{
		{"no owned field: unknown, not empty", `{"v":1,"id":"a","restored":[2]}`, sticky.Claims{Identity: "a", Restored: []int{2}}, ""},
		{"owned null: unknown", `{"v":1,"id":"a","owned":null}`, sticky.Claims{Identity: "a"}, ""},
		{"unknown fields of a newer release are ignored", `{"v":1,"id":"a","lag":[1]}`, sticky.Claims{Identity: "a"}, ""},
		{"an older release's data has no address", `{"v":1,"id":"a","owned":[2]}`, sticky.Claims{Identity: "a", Owned: []int{2}}, ""},
		{"empty", ``, sticky.Claims{}, "no user data"},
		{"not JSON", `not json`, sticky.Claims{}, "sticky: user data: invalid character"},
		{"another version", `{"v":99,"id":"p-0","owned":[0,1,2,3]}`, sticky.Claims{}, "version 99, want 1"},
		{"no version", `{"id":"p-0","owned":[0]}`, sticky.Claims{}, "version 0, want 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sticky.ParseUserData([]byte(tc.data))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestClaimsWith: the claims a member states after a generation and after a
// restart, with and without standby replicas.
func TestClaimsWith(t *testing.T) {
	restarted := sticky.Claims{Identity: "p"}.WithRestored(map[string][]int{input: {4, 1}, labels: {1}})
	if want := (sticky.Claims{Identity: "p", Restored: []int{1, 4}}); !reflect.DeepEqual(restarted, want) {
		t.Fatalf("WithRestored: %#v, want %#v", restarted, want)
	}
	assigned := map[string][]int{input: {3, 1}, labels: {1, 3}, "cl": {2, 0}}
	for _, tc := range []struct {
		name         string
		standbyTopic string
		want         sticky.Claims
	}{
		{"standby off: every topic is owned", "", sticky.Claims{Identity: "p", Owned: []int{0, 1, 2, 3}}},
		{"standby on: the changelog is tailed", "cl", sticky.Claims{Identity: "p", Owned: []int{1, 3}, Standby: []int{0, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restarted.WithOwned(assigned, tc.standbyTopic); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("WithOwned: %#v, want %#v", got, tc.want)
			}
		})
	}
	if got := restarted.WithOwned(nil, ""); got.Owned == nil || len(got.Owned) != 0 {
		t.Fatalf("WithOwned(nil): Owned %#v, want empty and not nil (owns nothing, known)", got.Owned)
	}
}
