package changelog_test

import (
	"fmt"

	"github.com/kernelstream/kernelstream/changelog"
)

// A checkpoint writes, in one transaction, one bundle per changed key (the
// key's learner, with the checkpoint's offsets), a record per changed
// pending entry and then a marker; a restore decodes them in the order
// Kafka returns them.
func ExampleDecode() {
	key := changelog.BundleKey([]byte("user-7"))
	value := changelog.EncodeBundle(nil, &changelog.Bundle{Seq: 3, NextIn: 1200, NextLab: -2, Learner: []byte("state")})
	d, err := changelog.Decode(key, value)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: checkpoint %d, input below %d, %d bytes of learner\n", d.Routing, d.Bundle.Seq, d.Bundle.NextIn, len(d.Bundle.Learner))

	m, _ := changelog.Decode(changelog.MarkerKey(), changelog.EncodeMarker(nil, &changelog.Marker{Seq: 3, Meta: []byte{2}}))
	fmt.Println("marker of checkpoint", m.Marker.Seq)

	gone, _ := changelog.Decode(key, nil) // a tombstone: the key was erased
	fmt.Println("erased:", gone.Bundle == nil && gone.Marker == nil)
	// Output:
	// user-7: checkpoint 3, input below 1200, 5 bytes of learner
	// marker of checkpoint 3
	// erased: true
}
