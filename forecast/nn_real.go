//go:build !nnf32

package forecast

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// nnReal is the precision of the neural models' weights and activations: float64 by default,
// float32 with the nnf32 build tag (nn_real32.go): gonum's sgemm ran ≈1.6× its dgemm rate on
// the shapes of a training step here, at the cost of precision. The series, scaling and loss
// sums stay float64 either way, and the saved format stores float64, so a model file reads in
// both builds.
type nnReal = float64

// Finite-difference settings of the gradient check: float64 resolves a 1e-6 step.
const (
	nnGradEps    = 1e-6
	nnGradAbsTol = 1e-8
	nnGradRelTol = 1e-5
)

// nnMat is a row-major matrix view in nnReal precision.
type nnMat struct {
	Rows, Cols, Stride int
	Data               []nnReal
}

// nnGemm is C = alpha·op(A)·op(B) + beta·C in nnReal precision.
func nnGemm(tA, tB blas.Transpose, alpha nnReal, a, b nnMat, beta nnReal, c nnMat) {
	blas64.Gemm(tA, tB, alpha,
		blas64.General{Rows: a.Rows, Cols: a.Cols, Stride: a.Stride, Data: a.Data},
		blas64.General{Rows: b.Rows, Cols: b.Cols, Stride: b.Stride, Data: b.Data},
		beta, blas64.General{Rows: c.Rows, Cols: c.Cols, Stride: c.Stride, Data: c.Data})
}

// nnGemv is y = alpha·op(A)·x + beta·y in nnReal precision.
func nnGemv(t blas.Transpose, alpha nnReal, a nnMat, x []nnReal, beta nnReal, y []nnReal) {
	blas64.Gemv(t, alpha, blas64.General{Rows: a.Rows, Cols: a.Cols, Stride: a.Stride, Data: a.Data},
		blas64.Vector{N: len(x), Inc: 1, Data: x}, beta, blas64.Vector{N: len(y), Inc: 1, Data: y})
}
