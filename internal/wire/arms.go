package wire

import (
	"bytes"
	"hash/maphash"
	"math/bits"
	"strconv"
)

// A decision's arms: their objects, and the check that no two share an id.

// armsList reads [{"id":..,"x":..}, ...].
func (d *Decoder) armsList() error {
	if !d.eat('[') {
		if err := d.skipValue(0); err != nil {
			return err
		}
		return Bad(ReasonWrongType, "arms: want an array of {id, x}")
	}
	d.skipWS()
	if d.eat(']') {
		return Bad(ReasonMissingField, "arms: empty")
	}
	for {
		d.skipWS()
		if !d.eat('{') {
			if err := d.skipValue(0); err != nil {
				return err
			}
			return Bad(ReasonWrongType, "arms: each arm is an object {id, x}")
		}
		// grow the flat buffer by one row; rows are re-sliced at the end
		// because append may move the backing array.
		n := len(d.armIDs)
		if cap(d.armFlat) < (n+1)*d.dim {
			grown := make([]float64, (n+1)*d.dim, 2*(n+1)*d.dim)
			copy(grown, d.armFlat)
			d.armFlat = grown
		}
		d.armFlat = d.armFlat[:(n+1)*d.dim]
		row := d.armFlat[n*d.dim : (n+1)*d.dim]
		var id []byte
		gotX := false
		d.skipWS()
		if !d.eat('}') {
			for {
				d.skipWS()
				name, err := d.fieldName()
				if err != nil {
					return err
				}
				d.skipWS()
				if !d.eat(':') {
					return Bad(ReasonBadJSON, "arms: missing ':'")
				}
				d.skipWS()
				switch string(name) {
				case `"id"`:
					if id != nil {
						return Bad(ReasonBadJSON, "arms: repeated id")
					}
					if id, err = d.idToken("arms.id"); err != nil {
						return err
					}
					if len(id) > d.lim.ID {
						return tooLong("arms["+strconv.Itoa(n)+"].id", len(id), "max_id_bytes", d.lim.ID)
					}
				case `"x"`:
					if gotX {
						return Bad(ReasonBadJSON, "arms: repeated x")
					}
					if _, err = d.vector(row, "arms.x"); err != nil {
						return err
					}
					gotX = true
				default:
					if err = d.skipValue(0); err != nil {
						return err
					}
				}
				d.skipWS()
				if d.eat(',') {
					continue
				}
				if d.eat('}') {
					break
				}
				return Bad(ReasonBadJSON, "arms: expected ',' or '}'")
			}
		}
		if id == nil || !gotX {
			return Bad(ReasonMissingField, "arms: each arm needs id and x")
		}
		d.armIDs = append(d.armIDs, id)
		d.skipWS()
		if d.eat(',') {
			continue
		}
		if d.eat(']') {
			break
		}
		return Bad(ReasonBadJSON, "arms: expected ',' or ']'")
	}
	if i, j := d.repeatedArm(); j >= 0 {
		return Bad(ReasonBadFields, "arms["+strconv.Itoa(j)+"].id "+string(d.armIDs[j])+" repeats arms["+strconv.Itoa(i)+"].id "+string(d.armIDs[i])+
			": a reward could not say which arm it is for")
	}
	d.armRows = d.armRows[:0]
	for i := range d.armIDs {
		d.armRows = append(d.armRows, d.armFlat[i*d.dim:(i+1)*d.dim])
	}
	return nil
}

// repeatedArm returns two arms i < j whose ids are the same id to the
// output's readers (the same token, or tokens that decode to the same
// value: "a" and "\u0061"), or j = -1. A few arms are compared pairwise;
// more go through a hash table of arm indices, reused from record to
// record, so that a decision of thousands of arms costs n, not n², and
// allocates nothing.
func (d *Decoder) repeatedArm() (i, j int) {
	ids := d.canonicalArmIDs()
	if len(ids) <= 8 {
		for j := 1; j < len(ids); j++ {
			for i := 0; i < j; i++ {
				if bytes.Equal(ids[i], ids[j]) {
					return i, j
				}
			}
		}
		return -1, -1
	}
	size := 1 << bits.Len(uint(2*len(ids))) // a load factor under one half
	if cap(d.slots) < size {
		d.slots = make([]int32, size)
	}
	slots := d.slots[:size]
	clear(slots)
	mask := uint64(size - 1)
	for j, id := range ids {
		for h := maphash.Bytes(armSeed, id) & mask; ; h = (h + 1) & mask {
			i := slots[h] - 1 // slots hold index+1; 0 is empty
			if i < 0 {
				slots[h] = int32(j + 1)
				break
			}
			if bytes.Equal(ids[i], id) {
				return int(i), j
			}
		}
	}
	return -1, -1
}

// armSeed seeds repeatedArm's hash: any seed finds the same repeats.
var armSeed = maphash.MakeSeed()

// canonicalArmIDs returns the arms' ids in canonical form: the tokens
// themselves unless one has an escape (or is -0), then canonical copies in
// a reused buffer, sized first so that it never moves under the slices.
func (d *Decoder) canonicalArmIDs() [][]byte {
	need := 0
	for _, id := range d.armIDs {
		if needsCanonical(id) {
			need += len(id) // a canonical form is never longer than its token
		}
	}
	if need == 0 {
		return d.armIDs
	}
	if cap(d.canon) < need {
		d.canon = make([]byte, 0, need)
	}
	d.canon, d.armKeys = d.canon[:0], d.armKeys[:0]
	for _, id := range d.armIDs {
		if needsCanonical(id) {
			start := len(d.canon)
			d.canon = canonical(d.canon, id)
			id = d.canon[start:]
		}
		d.armKeys = append(d.armKeys, id)
	}
	return d.armKeys
}
