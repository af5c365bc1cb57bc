package models

import (
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// MarshalBinary writes the PRNG, the stage-1 model and, once the sketch is
// built, the whole second stage: CountSketch rows, landmarks, Phi_pm, the
// TISVD factors, Z, the ONS iterate and A^{-1}, and the ring of inserted
// points. The scratch and the landmark copies are rebuilt on restore.
func (l *FORKS) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *FORKS) AppendBinary(dst []byte) ([]byte, error) {
	n := 256 + 8*(len(l.st1.sv)+l.budget)
	if l.sketched {
		n += 8 * (l.budget + l.sm + l.sp*l.sm + l.sp*l.k + l.k + l.sm*l.k + l.k + l.k*l.k + l.ringN*(l.dim+1))
	}
	w := NewStateWriter(slices.Grow(dst, n), "forks", forksStateVersion)
	w.Rand(&l.rng)
	l.st1.marshal(&w)
	w.Bool(l.sketched)
	if l.sketched {
		w.Int(l.r)
		w.Ints(l.code)
		w.Ints(l.lm)
		w.Floats(l.phiPM)
		w.Floats(l.ts.V)
		w.Floats(l.ts.lam)
		w.Floats(l.z)
		w.Floats(l.v)
		w.Floats(l.ainv)
		w.Int(l.ringN)
		w.Int(l.ringHead)
		w.Floats(l.ringX[:l.ringN*l.dim])
		w.Ints(l.ringCode[:l.ringN])
	}
	return w.Finish(), nil
}

func (l *FORKS) UnmarshalBinary(blob []byte) error {
	rd, _, err := NewStateReader(blob, "forks", forksStateVersion)
	if err != nil {
		return err
	}
	var rng Rand
	rd.Rand(&rng)
	st1 := l.st1.decode(rd)
	sketched := rd.Bool()
	rd.Check(!sketched || st1.n == l.budget, "sketch built before the budget filled")
	rd.Check(sketched || st1.n < l.budget, "full budget without a sketch")
	var r, ringN, ringHead int
	var code, lm, ringCode []int
	var phiPM, V, lam, z, v, ainv, ringX []float64
	if sketched {
		r = rd.Int()
		rd.Check(r >= 0, "round counter")
		code = rd.Ints(nil)
		rd.Check(len(code) == l.budget, "sketch row count")
		for _, c := range code {
			b, _ := forksDecode(c)
			rd.Check(c != 0 && b >= 0 && b < l.sp, "sketch bucket")
		}
		lm = rd.Ints(nil)
		rd.Check(len(lm) == l.sm, "landmark count")
		for _, i := range lm {
			rd.Check(i >= 0 && i < l.budget, "landmark index")
		}
		phiPM = rd.Floats(nil)
		rd.Check(len(phiPM) == l.sp*l.sm, "Phi_pm shape")
		V = rd.Floats(nil)
		rd.Check(len(V) == l.sp*l.k, "V shape")
		lam = rd.Floats(nil)
		rd.Check(len(lam) == l.k, "Lambda shape")
		z = rd.Floats(nil)
		rd.Check(len(z) == l.sm*l.k, "Z shape")
		v = rd.Floats(nil)
		rd.Check(len(v) == l.k, "v shape")
		ainv = rd.Floats(nil)
		rd.Check(len(ainv) == l.k*l.k, "A^-1 shape")
		ringN, ringHead = rd.Int(), rd.Int()
		rd.Check(ringN >= 0 && ringN <= l.window && ringHead >= 0 && (ringHead < l.window || l.window == 0 && ringHead == 0) &&
			(ringN == l.window || ringHead == ringN), "ring shape (params.window differs?)")
		ringX = rd.Floats(nil)
		rd.Check(len(ringX) == ringN*l.dim, "ring points")
		ringCode = rd.Ints(nil)
		rd.Check(len(ringCode) == ringN, "ring rows")
		for _, c := range ringCode {
			b, _ := forksDecode(c)
			rd.Check(c != 0 && b >= 0 && b < l.sp, "ring bucket")
		}
		rd.Check(linalg.AllFinite(phiPM) && linalg.AllFinite(V) && linalg.AllFinite(lam) &&
			linalg.AllFinite(z) && linalg.AllFinite(v) && linalg.AllFinite(ainv) && linalg.AllFinite(ringX), "non-finite sketch state")
	}
	rd.Check(st1.finite(), "non-finite support vectors")
	if err := rd.Err(); err != nil {
		return err
	}
	l.rng = rng
	l.st1.restore(st1)
	l.sketched = sketched
	l.memo.forget()
	if sketched {
		l.allocSketch()
		l.r = r
		copy(l.code, code)
		copy(l.lm, lm)
		copy(l.phiPM, phiPM)
		copy(l.ts.V, V)
		copy(l.ts.lam, lam)
		copy(l.z, z)
		copy(l.v, v)
		copy(l.ainv, ainv)
		copy(l.ringX, ringX)
		copy(l.ringCode, ringCode)
		l.ringN, l.ringHead = ringN, ringHead
		l.fillLandmarks()
	}
	return nil
}
