package wire

// Encoders of well-formed input records, for the programs that feed the
// service (cmd/produce, the demos, the benchmarks, the tests): the JSON of
// the contract is written here only. Ids are written as JSON strings;
// numbers in their shortest form that parses back to the same float64, so
// the service reads exactly the values given (non-finite ones, which no
// record may carry, are written as null and dead-lettered wrong_type).
// TestInputEncoders decodes each with Decoder.

// AppendFeatures appends a feature record {"id","x"}: predict, and keep the
// prediction pending until its label.
func AppendFeatures(b []byte, id string, x []float64) []byte {
	b = appendID(b, id)
	b = appendX(b, x)
	return append(b, '}')
}

// AppendLabeled appends a labelled feature record {"id","x","y"}: predict,
// then update at once.
func AppendLabeled(b []byte, id string, x []float64, y float64) []byte {
	b = appendID(b, id)
	b = appendX(b, x)
	b = append(b, `,"y":`...)
	b = appendFloat(b, y)
	return append(b, '}')
}

// AppendLabel appends the delayed label {"id","y"} of the feature record id.
func AppendLabel(b []byte, id string, y float64) []byte {
	b = appendID(b, id)
	b = append(b, `,"y":`...)
	b = appendFloat(b, y)
	return append(b, '}')
}

// AppendArm appends one arm {"id","x"} of a decision record (a catalogue
// can encode its items once and hand them to AppendDecision).
func AppendArm(b []byte, id string, x []float64) []byte {
	b = appendID(b, id)
	b = appendX(b, x)
	return append(b, '}')
}

// AppendDecision appends a decision record {"id","arms":[...]} whose arms
// are encoded by AppendArm, in the order given.
func AppendDecision(b []byte, id string, arms [][]byte) []byte {
	b = appendID(b, id)
	b = append(b, `,"arms":[`...)
	for i, a := range arms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, a...)
	}
	return append(b, "]}"...)
}

// AppendReward appends the reward {"id","reward","arm"} of the decision id
// for its arm arm; an empty arm is left out (the reward is then for the
// chosen, or top-ranked, arm).
func AppendReward(b []byte, id string, reward float64, arm string) []byte {
	b = appendID(b, id)
	b = append(b, `,"reward":`...)
	b = appendFloat(b, reward)
	if arm != "" {
		b = append(b, `,"arm":`...)
		b = appendString(b, []byte(arm))
	}
	return append(b, '}')
}

func appendID(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	return appendString(b, []byte(id))
}

func appendX(b []byte, x []float64) []byte {
	b = append(b, `,"x":[`...)
	for i, v := range x {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFloat(b, v)
	}
	return append(b, ']')
}
