package sticky

import (
	"encoding/json"
	"errors"
	"fmt"
)

// userDataVersion is the version of the wire layout below. Members of
// another version read as having no claims (ParseUserData), so a change of
// layout that older members cannot read needs a new version.
const userDataVersion = 1

// userData is the JSON carried in the JoinGroup user data. Owned is a
// pointer so that "owns nothing" (an empty list) and "does not know" (no
// field) stay apart on the wire. Groups run members of several releases at
// once (a rolling upgrade): the field names, their order and the omissions
// are the wire format and must not change (TestUserDataBytes pins them).
type userData struct {
	Version  int    `json:"v"`
	Identity string `json:"id,omitempty"`
	Owned    *[]int `json:"owned,omitempty"`
	Restored []int  `json:"restored,omitempty"`
	Standby  []int  `json:"standby,omitempty"` // changelog partitions tailed (a field older members ignore)
	Addr     string `json:"addr,omitempty"`    // the scoring address (a field older members ignore)
}

// UserData encodes c as the JoinGroup user data.
func (c Claims) UserData() ([]byte, error) {
	ud := userData{Version: userDataVersion, Identity: c.Identity, Restored: c.Restored, Standby: c.Standby, Addr: c.Addr}
	if c.Owned != nil {
		owned := append([]int{}, c.Owned...)
		ud.Owned = &owned
	}
	data, err := json.Marshal(ud)
	if err != nil {
		return nil, fmt.Errorf("sticky: encode user data of %q: %w", c.Identity, err)
	}
	return data, nil
}

// ParseUserData decodes a member's JoinGroup user data. Anything empty,
// unreadable or of another version is an error, with zero Claims.
func ParseUserData(data []byte) (Claims, error) {
	if len(data) == 0 {
		return Claims{}, errors.New("sticky: no user data")
	}
	var ud userData
	if err := json.Unmarshal(data, &ud); err != nil {
		return Claims{}, fmt.Errorf("sticky: user data: %w", err)
	}
	if ud.Version != userDataVersion {
		return Claims{}, fmt.Errorf("sticky: user data version %d, want %d", ud.Version, userDataVersion)
	}
	c := Claims{Identity: ud.Identity, Restored: ud.Restored, Standby: ud.Standby, Addr: ud.Addr}
	if ud.Owned != nil {
		c.Owned = append([]int{}, *ud.Owned...)
	}
	return c, nil
}
