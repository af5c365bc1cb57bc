package models_test

import (
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/models"
)

// A learner is built from a model spec and a routing key (which seeds its
// PRNG); it predicts first and updates when the label is known.
func ExampleNew() {
	spec, err := models.ParseSpec(`{"algorithm":"nons-ald","dim":1,"kernel":{"type":"gaussian","sigma":0.5}}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := models.New(spec, "user-7")
	if err != nil {
		fmt.Println(err)
		return
	}
	f := func(x float64) float64 { return 0.5 + 0.4*math.Sin(3*x) }
	var lastErr float64
	for t := 0; t < 400; t++ {
		x := []float64{math.Mod(float64(t)*0.618034, 1)*2 - 1} // a low-discrepancy sweep of [-1, 1]
		p := l.Predict(x)
		lastErr = math.Abs(p.Value - f(x[0]))
		if err := l.Update(x, p, f(x[0])); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("learnt:", lastErr < 0.05)
	// Output: learnt: true
}

// A learner's state is a versioned, checksummed blob: restoring it into a
// fresh learner of the same spec continues exactly where the first stopped.
func ExampleLearner_marshalBinary() {
	spec, _ := models.ParseSpec(`{"algorithm":"fogd","dim":2,"loss":"hinge","params":{"D":64}}`)
	a, _ := models.New(spec, "user-7")
	for t := 0; t < 50; t++ {
		x := []float64{float64(t%7) / 7, float64(t%5) / 5}
		y := 1.0
		if x[0] < x[1] {
			y = -1
		}
		_ = a.Update(x, a.Predict(x), y)
	}
	blob, _ := a.MarshalBinary()
	b, _ := models.New(spec, "user-7")
	if err := b.UnmarshalBinary(blob); err != nil {
		fmt.Println(err)
		return
	}
	x := []float64{0.3, 0.6}
	fmt.Println("same prediction:", a.Predict(x) == b.Predict(x))
	blob[len(blob)/2] ^= 1
	fmt.Println("corrupted blob refused:", b.UnmarshalBinary(blob) != nil)
	// Output:
	// same prediction: true
	// corrupted blob refused: true
}

// StateWriter and StateReader are the codec every learner's MarshalBinary and
// UnmarshalBinary are written with: a frame naming the algorithm and its
// state version, the fields, and a CRC-32C; reads fail softly and are
// checked once.
func ExampleStateWriter() {
	w := models.NewStateWriter(nil, "my-learner", 2)
	w.Int(3)
	w.Floats([]float64{0.5, -1.25})
	blob := w.Finish()

	r, version, err := models.NewStateReader(blob, "my-learner", 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	n := r.Int()
	v := r.Floats(nil)
	fmt.Println(version, n, v, r.Err())

	_, _, err = models.NewStateReader(blob, "other-learner", 2)
	fmt.Println(err != nil)
	// Output:
	// 2 3 [0.5 -1.25] <nil>
	// true
}
