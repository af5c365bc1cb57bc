// Package label holds the wire contract's convention for classification
// labels, shared by the learners (models.Label) and the dataset helpers.
package label

// Binary maps a raw classification label to -1 or +1: positive values are
// +1, zero and negatives -1 (so 0/1 and -1/+1 files read the same).
func Binary(y float64) float64 {
	if y > 0 {
		return 1
	}
	return -1
}
