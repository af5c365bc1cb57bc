package processor

import "github.com/kernelstream/kernelstream/models"

// classLabel is the predicted class of a classification score (the
// output's label), 0 for a regression loss.
func classLabel(loss models.Loss, v float64) int {
	if !loss.Classification() {
		return 0
	}
	if v > 0 {
		return 1
	}
	return -1
}
