package forecast

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"
)

// The neural models: "lstm" (one direction) and "bilstm" (the paper's model, two directions
// whose final hidden states are concatenated). Both share nnModel; the only difference is the
// number of directions.
func init() {
	Register("lstm", func(cfg Config) (Forecaster, error) { return nnNew(cfg, false) })
	Register("bilstm", func(cfg Config) (Forecaster, error) { return nnNew(cfg, true) })
}

// Defaults of the neural models. The paper's values where it gives one (window 30, 100 hidden
// units, 10,000 iterations, batch 64); the rest are choices explained where they are used.
const (
	nnDefaultWindow = 30
	nnDefaultHidden = 100
	nnDefaultIters  = 10000
	nnDefaultBatch  = 64
	nnDefaultLR     = 1e-3

	// nnColdBudget bounds the first Fit of a model (random weights). On a controller node a
	// BiLSTM step with the paper's shapes costs ≈0.9 GFLOP, so 20 s buys a few hundred steps:
	// enough to get close to a long run's validation error on 760 points.
	nnColdBudget = 20 * time.Second
	// nnWarmBudget bounds every later Fit, which starts from the previous weights and only has
	// to follow the newest data; retraining runs periodically beside the decision loop, so it
	// must stay cheap.
	nnWarmBudget = 5 * time.Second

	// nnPatience is how many validation checks (one per epoch) may pass without a new best
	// validation loss before training stops early.
	nnPatience = 20
	// nnMinWindows is the fewest training windows Fit accepts.
	nnMinWindows = 10
	// nnClipNorm caps the global gradient norm: a burst in the trace must not throw the
	// weights away in one Adam step.
	nnClipNorm = 1.0
	// nnConvergeRel replaces the paper's absolute "training loss < 1e-4": after min-max
	// scaling and differencing a smooth trace's targets have a variance far below 1e-4, so the
	// absolute test would stop before learning anything. Training has converged when the loss
	// is below this fraction of the targets' variance (R² above 0.9999).
	nnConvergeRel = 1e-4
)

// nnModel is a one-layer (bi)directional LSTM with input and output size 1 and a linear
// output layer on the final hidden states. It predicts the next first difference of the
// min-max-scaled series from the last Window differences.
type nnModel struct {
	cfg   Config
	bidir bool
	nDir  int
	L, H  int

	// params holds, per direction, W ((1+H)×4H, row-major; row 0 multiplies the input, rows
	// 1..H the previous hidden state; gate columns i, f, g, o) then the bias (4H); after the
	// directions come the output weights (nDir·H) and the output bias (1). One flat slice
	// makes Adam, Clone and Save one loop each.
	params []nnReal
	// Adam moments survive between fits so that a warm retrain continues smoothly instead
	// of restarting with full-size first steps.
	adamM, adamV []nnReal
	adamT        int

	fitted   bool
	lo, span float64 // min-max scaling of the last Fit: scaled = (x-lo)/span

	pcg *rand.PCG
	rng *rand.Rand

	ts *nnTrainScratch // training buffers of the running Fit (nil otherwise), never shared by clones
	ps *nnPredScratch  // inference buffers, so Predict does not allocate
}

// nnTrainScratch holds the activations of one minibatch kept for backpropagation.
type nnTrainScratch struct {
	B     int
	grads []nnReal
	x     []nnReal // B×L inputs
	y     []nnReal // B targets
	dy    []nnReal // B: dLoss/dŷ
	dirs  []nnDirScratch
	best  []nnReal
	perm  []int
}

// nnDirScratch holds one direction's activations for every time step.
type nnDirScratch struct {
	ain   []nnReal // L×B×(1+H): [x_t, h_{t-1}] rows, the left operand of the gate gemm
	gates []nnReal // L×B×4H: activated gates i, f, g, o
	cs    []nnReal // L×B×H cell states
	tc    []nnReal // L×B×H tanh of the cell states
	hLast []nnReal // B×H final hidden state
	dz    []nnReal // B×4H gate pre-activation gradients of one step
	dh    []nnReal // B×H gradient flowing into h_t
	dc    []nnReal // B×H gradient flowing into c_t from the next step
}

// nnPredScratch holds single-window inference buffers.
type nnPredScratch struct {
	w    []nnReal // L scaled differences
	a    []nnReal // 1+H: [x_t, h_{t-1}]
	z    []nnReal // 4H
	c    []nnReal // H
	hcat []nnReal // nDir·H
}

func nnNew(cfg Config, bidir bool) (*nnModel, error) {
	if cfg.Window == 0 {
		cfg.Window = nnDefaultWindow
	}
	if cfg.Hidden == 0 {
		cfg.Hidden = nnDefaultHidden
	}
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = nnDefaultIters
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = nnDefaultBatch
	}
	if cfg.LearningRate == 0 {
		cfg.LearningRate = nnDefaultLR
	}
	switch {
	case cfg.Window < 1:
		return nil, fmt.Errorf("window %d: must be at least 1", cfg.Window)
	case cfg.Hidden < 1:
		return nil, fmt.Errorf("hidden %d: must be at least 1", cfg.Hidden)
	case cfg.MaxIterations < 0:
		return nil, fmt.Errorf("max_iterations %d: must not be negative", cfg.MaxIterations)
	case cfg.BatchSize < 1:
		return nil, fmt.Errorf("batch_size %d: must be at least 1", cfg.BatchSize)
	case !(cfg.LearningRate > 0) || math.IsInf(cfg.LearningRate, 0):
		return nil, fmt.Errorf("learning_rate %v: must be positive and finite", cfg.LearningRate)
	case cfg.TimeBudget < 0:
		return nil, fmt.Errorf("time_budget %v: must not be negative", cfg.TimeBudget)
	}
	m := &nnModel{cfg: cfg, bidir: bidir, nDir: 1, L: cfg.Window, H: cfg.Hidden}
	if bidir {
		m.nDir = 2
	}
	n := m.nnNumParams()
	m.params = make([]nnReal, n)
	m.adamM = make([]nnReal, n)
	m.adamV = make([]nnReal, n)
	m.pcg = rand.NewPCG(uint64(cfg.Seed), 0x9e3779b97f4a7c15)
	m.rng = rand.New(m.pcg)
	m.nnInit()
	return m, nil
}

// Layout of params.
func (m *nnModel) nnDirSize() int     { return (1+m.H)*4*m.H + 4*m.H }
func (m *nnModel) nnWOff(d int) int   { return d * m.nnDirSize() }
func (m *nnModel) nnBOff(d int) int   { return d*m.nnDirSize() + (1+m.H)*4*m.H }
func (m *nnModel) nnWyOff() int       { return m.nDir * m.nnDirSize() }
func (m *nnModel) nnByOff() int       { return m.nnWyOff() + m.nDir*m.H }
func (m *nnModel) nnNumParams() int   { return m.nnByOff() + 1 }
func (m *nnModel) nnW(d int) []nnReal { return m.params[m.nnWOff(d):m.nnBOff(d)] }

// nnInit draws the weights as PyTorch does (uniform in ±1/√H) and sets the forget-gate bias to
// 1, so that the cell state is remembered from the start instead of having to learn it.
func (m *nnModel) nnInit() {
	H := m.H
	k := 1 / math.Sqrt(float64(H))
	for i := range m.params {
		m.params[i] = nnReal((2*m.rng.Float64() - 1) * k)
	}
	for d := 0; d < m.nDir; d++ {
		b := m.params[m.nnBOff(d) : m.nnBOff(d)+4*H]
		for j := H; j < 2*H; j++ {
			b[j] = 1
		}
	}
	ky := 1 / math.Sqrt(float64(m.nDir*H))
	for i := m.nnWyOff(); i < len(m.params); i++ {
		m.params[i] = nnReal((2*m.rng.Float64() - 1) * ky)
	}
}

// Name returns "bilstm" or "lstm".
func (m *nnModel) Name() string {
	if m.bidir {
		return "bilstm"
	}
	return "lstm"
}

// MinHistory is one window plus nnMinWindows training windows: fewer leave nothing to learn
// from and no validation set.
func (m *nnModel) MinHistory() int { return m.L + 1 + nnMinWindows }

// Config returns the model's settings with defaults filled in; Save stores it.
func (m *nnModel) Config() Config { return m.cfg }

// Clone deep-copies weights, Adam state, scaling and random state. Scratch buffers are not
// shared, so Fit on the clone never touches the original: the runner trains a clone off the
// decision path and swaps it in.
func (m *nnModel) Clone() Forecaster {
	c := *m
	c.params = append([]nnReal(nil), m.params...)
	c.adamM = append([]nnReal(nil), m.adamM...)
	c.adamV = append([]nnReal(nil), m.adamV...)
	pcg := *m.pcg
	c.pcg = &pcg
	c.rng = rand.New(c.pcg)
	c.ts, c.ps = nil, nil
	return &c
}

func nnSigmoid(x nnReal) nnReal { return nnReal(1 / (1 + math.Exp(-float64(x)))) }

func nnTanh(x nnReal) nnReal { return nnReal(math.Tanh(float64(x))) }

// nnCopy converts float64 series values into the network's precision.
func nnCopy(dst []nnReal, src []float64) {
	for i, v := range src {
		dst[i] = nnReal(v)
	}
}

// nnScratch returns training buffers for batches of up to B windows.
func (m *nnModel) nnScratch(B int) *nnTrainScratch {
	if m.ts != nil && m.ts.B == B {
		return m.ts
	}
	L, H, A, G := m.L, m.H, 1+m.H, 4*m.H
	s := &nnTrainScratch{
		B:     B,
		grads: make([]nnReal, len(m.params)),
		x:     make([]nnReal, B*L),
		y:     make([]nnReal, B),
		dy:    make([]nnReal, B),
		best:  make([]nnReal, len(m.params)),
		dirs:  make([]nnDirScratch, m.nDir),
	}
	for d := range s.dirs {
		s.dirs[d] = nnDirScratch{
			ain:   make([]nnReal, L*B*A),
			gates: make([]nnReal, L*B*G),
			cs:    make([]nnReal, L*B*H),
			tc:    make([]nnReal, L*B*H),
			hLast: make([]nnReal, B*H),
			dz:    make([]nnReal, B*G),
			dh:    make([]nnReal, B*H),
			dc:    make([]nnReal, B*H),
		}
	}
	m.ts = s
	return s
}

// nnForwardDir runs direction d over the B windows in s.x. The gate pre-activations of the
// whole batch come from one [B×(1+H)]·[(1+H)×4H] gemm per time step: the input and recurrent
// weights are one matrix so that the step is a single large BLAS call.
func (m *nnModel) nnForwardDir(d int, s *nnTrainScratch, B int) {
	L, H, A, G := m.L, m.H, 1+m.H, 4*m.H
	ds := &s.dirs[d]
	W := nnMat{Rows: A, Cols: G, Stride: G, Data: m.nnW(d)}
	bias := m.params[m.nnBOff(d) : m.nnBOff(d)+G]
	for t := 0; t < L; t++ {
		ain := ds.ain[t*B*A : (t+1)*B*A]
		src := t
		if d == 1 {
			src = L - 1 - t
		}
		for b := 0; b < B; b++ {
			ain[b*A] = s.x[b*L+src]
			if t == 0 {
				clear(ain[b*A+1 : (b+1)*A])
			}
		}
		z := ds.gates[t*B*G : (t+1)*B*G]
		for b := 0; b < B; b++ {
			copy(z[b*G:(b+1)*G], bias)
		}
		nnGemm(blas.NoTrans, blas.NoTrans, 1,
			nnMat{Rows: B, Cols: A, Stride: A, Data: ain}, W,
			1, nnMat{Rows: B, Cols: G, Stride: G, Data: z})
		c := ds.cs[t*B*H : (t+1)*B*H]
		tc := ds.tc[t*B*H : (t+1)*B*H]
		var cprev []nnReal
		if t > 0 {
			cprev = ds.cs[(t-1)*B*H : t*B*H]
		}
		for b := 0; b < B; b++ {
			zb := z[b*G : (b+1)*G]
			var hout []nnReal
			if t+1 < L {
				hout = ds.ain[(t+1)*B*A+b*A+1 : (t+1)*B*A+(b+1)*A]
			} else {
				hout = ds.hLast[b*H : (b+1)*H]
			}
			for j := 0; j < H; j++ {
				ig := nnSigmoid(zb[j])
				fg := nnSigmoid(zb[H+j])
				gg := nnTanh(zb[2*H+j])
				og := nnSigmoid(zb[3*H+j])
				zb[j], zb[H+j], zb[2*H+j], zb[3*H+j] = ig, fg, gg, og
				cv := ig * gg
				if cprev != nil {
					cv += fg * cprev[b*H+j]
				}
				c[b*H+j] = cv
				th := nnTanh(cv)
				tc[b*H+j] = th
				hout[j] = og * th
			}
		}
	}
}

// nnBackwardDir backpropagates through time from ds.dh (the gradient on the final hidden
// state) and accumulates into s.grads. Per step: dW += [x,h]_tᵀ·dZ_t and dh_{t-1} =
// dZ_t·W_recᵀ, two gemms of the forward one's size. (One [(1+H)×LB]·[LB×4H] gemm for dW
// after the loop was measured slower: its 6 MB operands fall out of cache, while per step
// dZ_t is still hot.)
func (m *nnModel) nnBackwardDir(d int, s *nnTrainScratch, B int) {
	L, H, A, G := m.L, m.H, 1+m.H, 4*m.H
	ds := &s.dirs[d]
	gW := nnMat{Rows: A, Cols: G, Stride: G, Data: s.grads[m.nnWOff(d):m.nnBOff(d)]}
	gb := s.grads[m.nnBOff(d) : m.nnBOff(d)+G]
	wrec := nnMat{Rows: H, Cols: G, Stride: G, Data: m.nnW(d)[G:]}
	dhG := nnMat{Rows: B, Cols: H, Stride: H, Data: ds.dh[:B*H]}
	clear(ds.dc[:B*H])
	for t := L - 1; t >= 0; t-- {
		gates := ds.gates[t*B*G : (t+1)*B*G]
		tc := ds.tc[t*B*H : (t+1)*B*H]
		dzt := ds.dz[:B*G]
		var cprev []nnReal
		if t > 0 {
			cprev = ds.cs[(t-1)*B*H : t*B*H]
		}
		for b := 0; b < B; b++ {
			gb4 := gates[b*G : (b+1)*G]
			dz := dzt[b*G : (b+1)*G]
			for j := 0; j < H; j++ {
				ig, fg, gg, og := gb4[j], gb4[H+j], gb4[2*H+j], gb4[3*H+j]
				th := tc[b*H+j]
				dh := ds.dh[b*H+j]
				dc := ds.dc[b*H+j] + dh*og*(1-th*th)
				var cp nnReal
				if cprev != nil {
					cp = cprev[b*H+j]
				}
				dz[j] = dc * gg * ig * (1 - ig)
				dz[H+j] = dc * cp * fg * (1 - fg)
				dz[2*H+j] = dc * ig * (1 - gg*gg)
				dz[3*H+j] = dh * th * og * (1 - og)
				ds.dc[b*H+j] = dc * fg
			}
			for k, v := range dz {
				gb[k] += v
			}
		}
		dzG := nnMat{Rows: B, Cols: G, Stride: G, Data: dzt}
		ain := nnMat{Rows: B, Cols: A, Stride: A, Data: ds.ain[t*B*A : (t+1)*B*A]}
		nnGemm(blas.Trans, blas.NoTrans, 1, ain, dzG, 1, gW)
		if t > 0 {
			nnGemm(blas.NoTrans, blas.Trans, 1, dzG, wrec, 0, dhG)
		}
	}
}

// nnLossGrad returns the mean squared error of the first B windows in s and, when grad is
// set, writes its gradient with respect to every parameter into s.grads.
func (m *nnModel) nnLossGrad(s *nnTrainScratch, B int, grad bool) float64 {
	H := m.H
	m.nnEachDir(func(d int) { m.nnForwardDir(d, s, B) })
	wy := m.params[m.nnWyOff():m.nnByOff()]
	by := m.params[m.nnByOff()]
	loss := 0.0
	for b := 0; b < B; b++ {
		yh := by
		for d := 0; d < m.nDir; d++ {
			h := s.dirs[d].hLast[b*H : (b+1)*H]
			w := wy[d*H : (d+1)*H]
			for j, v := range h {
				yh += w[j] * v
			}
		}
		r := yh - s.y[b]
		loss += float64(r * r)
		s.dy[b] = 2 * r / nnReal(B)
	}
	loss /= float64(B)
	if !grad {
		return loss
	}
	clear(s.grads)
	gwy := s.grads[m.nnWyOff():m.nnByOff()]
	for b := 0; b < B; b++ {
		dy := s.dy[b]
		s.grads[m.nnByOff()] += dy
		for d := 0; d < m.nDir; d++ {
			h := s.dirs[d].hLast[b*H : (b+1)*H]
			dh := s.dirs[d].dh[b*H : (b+1)*H]
			for j := 0; j < H; j++ {
				gwy[d*H+j] += dy * h[j]
				dh[j] = dy * wy[d*H+j]
			}
		}
	}
	m.nnEachDir(func(d int) { m.nnBackwardDir(d, s, B) })
	return loss
}

// nnEachDir runs f for every direction. The two directions of a BiLSTM share no buffers and
// write disjoint gradient blocks, so they run concurrently: the elementwise gate work, which
// gemm parallelism does not cover, then uses both cores of a small node too.
func (m *nnModel) nnEachDir(f func(d int)) {
	if m.nDir == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f(1)
	}()
	f(0)
	wg.Wait()
}

// nnAdamStep applies one Adam update with global-norm gradient clipping.
func (m *nnModel) nnAdamStep(g []nnReal) {
	const b1, b2, eps = 0.9, 0.999, 1e-8
	norm := 0.0
	for _, v := range g {
		norm += float64(v * v)
	}
	norm = math.Sqrt(norm)
	scale := 1.0
	if norm > nnClipNorm {
		scale = nnClipNorm / norm
	}
	m.adamT++
	c1 := 1 - math.Pow(b1, float64(m.adamT))
	c2 := 1 - math.Pow(b2, float64(m.adamT))
	lr := m.cfg.LearningRate
	for i, gv := range g {
		v := float64(gv) * scale
		mi := b1*float64(m.adamM[i]) + (1-b1)*v
		vi := b2*float64(m.adamV[i]) + (1-b2)*v*v
		m.adamM[i], m.adamV[i] = nnReal(mi), nnReal(vi)
		m.params[i] -= nnReal(lr * (mi / c1) / (math.Sqrt(vi/c2) + eps))
	}
}

// nnPrepare scales history to [0,1] and differences it. The scaling is stored in the model:
// Predict must invert exactly the transform the weights were trained on.
func (m *nnModel) nnPrepare(history []float64) []float64 {
	lo, hi := history[0], history[0]
	for _, v := range history {
		lo = math.Min(lo, v)
		hi = math.Max(hi, v)
	}
	span := hi - lo
	if !(span > 0) {
		span = 1 // constant series: every difference is 0 whatever the span
	}
	m.lo, m.span = lo, span
	d := make([]float64, len(history)-1)
	for i := range d {
		d[i] = (history[i+1] - history[i]) / span
	}
	return d
}

// nnValLoss is the mean squared error over windows [from, to) of the differenced series,
// computed in batches of at most s.B.
func (m *nnModel) nnValLoss(s *nnTrainScratch, diffs []float64, from, to int) float64 {
	L := m.L
	total := 0.0
	for k0 := from; k0 < to; k0 += s.B {
		B := min(s.B, to-k0)
		for b := 0; b < B; b++ {
			k := k0 + b
			nnCopy(s.x[b*L:(b+1)*L], diffs[k:k+L])
			s.y[b] = nnReal(diffs[k+L])
		}
		total += m.nnLossGrad(s, B, false) * float64(B)
	}
	return total / float64(to-from)
}

// Fit trains on history with Adam, continuing from the current weights. The last 10 % of the
// windows (by time) validate; the weights with the best validation loss are kept, so a retrain
// never leaves the model worse on recent data than it started. Training ends on the first of:
// context done, iteration cap, time budget, convergence, or no validation improvement for
// nnPatience epochs. On cancellation the best weights so far are kept and ctx.Err() is
// returned with the report.
func (m *nnModel) Fit(ctx context.Context, history []float64) (FitReport, error) {
	start := time.Now()
	// The training buffers (≈10 MB a direction at the paper's shapes) serve this fit only:
	// Predict does not use them, and a live retrain fits a clone, which starts without them.
	// Kept, they were 85 % of a trained neural policy's memory.
	defer func() { m.ts = nil }()
	rep := FitReport{Model: m.Name()}
	if err := CheckHistory(history, m.MinHistory()); err != nil {
		return rep, fmt.Errorf("%s: %w", m.Name(), err)
	}
	L := m.L
	diffs := m.nnPrepare(history)
	nWin := len(diffs) - L
	nVal := max(1, nWin/10)
	nTrain := nWin - nVal
	budget := m.cfg.TimeBudget
	if budget == 0 {
		budget = nnColdBudget
		if m.fitted {
			budget = nnWarmBudget
		}
	}
	B := min(m.cfg.BatchSize, nTrain)
	s := m.nnScratch(B)
	if len(s.perm) != nTrain {
		s.perm = make([]int, nTrain)
		for i := range s.perm {
			s.perm[i] = i
		}
	}
	mean, varT := 0.0, 0.0
	for k := 0; k < nTrain; k++ {
		mean += diffs[k+L]
	}
	mean /= float64(nTrain)
	for k := 0; k < nTrain; k++ {
		r := diffs[k+L] - mean
		varT += r * r
	}
	varT /= float64(nTrain)

	best := m.nnValLoss(s, diffs, nTrain, nWin)
	copy(s.best, m.params)
	evalEvery := max(1, nTrain/B)
	sinceBest, it, cnt, pos := 0, 0, 0, nTrain
	sum := 0.0
	reason := ""
	for reason == "" {
		switch {
		case ctx.Err() != nil:
			reason = StopCanceled
			continue
		case it >= m.cfg.MaxIterations:
			reason = StopMaxIterations
			continue
		case time.Since(start) >= budget:
			reason = StopTimeBudget
			continue
		}
		for b := 0; b < B; b++ {
			if pos == nTrain {
				m.rng.Shuffle(nTrain, func(i, j int) { s.perm[i], s.perm[j] = s.perm[j], s.perm[i] })
				pos = 0
			}
			k := s.perm[pos]
			pos++
			nnCopy(s.x[b*L:(b+1)*L], diffs[k:k+L])
			s.y[b] = nnReal(diffs[k+L])
		}
		sum += m.nnLossGrad(s, B, true)
		cnt++
		m.nnAdamStep(s.grads)
		it++
		if it%evalEvery != 0 {
			continue
		}
		rep.TrainLoss, sum, cnt = sum/float64(cnt), 0, 0
		if v := m.nnValLoss(s, diffs, nTrain, nWin); v < best {
			best, sinceBest = v, 0
			copy(s.best, m.params)
		} else {
			sinceBest++
		}
		switch {
		case rep.TrainLoss < nnConvergeRel*varT:
			reason = StopConverged
		case sinceBest >= nnPatience:
			reason = StopEarlyStopping
		}
	}
	if cnt > 0 && reason != StopCanceled {
		rep.TrainLoss = sum / float64(cnt)
		if v := m.nnValLoss(s, diffs, nTrain, nWin); v < best {
			best = v
			copy(s.best, m.params)
		}
	}
	copy(m.params, s.best)
	m.fitted = true
	rep.Iterations = it
	rep.ValidationLoss = best
	rep.StopReason = reason
	rep.Duration = time.Since(start)
	if reason == StopCanceled {
		return rep, fmt.Errorf("%s: training canceled after %d iterations: %w", m.Name(), it, ctx.Err())
	}
	return rep, nil
}

// Predict forecasts len(dst) steps after history recursively: each predicted difference joins
// the input window of the next step. It needs Window+1 points and does not allocate once its
// buffers exist.
func (m *nnModel) Predict(history []float64, dst []float64) error {
	if !m.fitted {
		return fmt.Errorf("%s: Predict before Fit", m.Name())
	}
	if err := CheckHistory(history, m.L+1); err != nil {
		return fmt.Errorf("%s: %w", m.Name(), err)
	}
	p := m.ps
	if p == nil {
		p = &nnPredScratch{
			w:    make([]nnReal, m.L),
			a:    make([]nnReal, 1+m.H),
			z:    make([]nnReal, 4*m.H),
			c:    make([]nnReal, m.H),
			hcat: make([]nnReal, m.nDir*m.H),
		}
		m.ps = p
	}
	n := len(history)
	for i := 0; i < m.L; i++ {
		p.w[i] = nnReal((history[n-m.L+i] - history[n-m.L+i-1]) / m.span)
	}
	level := (history[n-1] - m.lo) / m.span
	for k := range dst {
		dhat := m.nnForward1(p)
		level += dhat
		dst[k] = level*m.span + m.lo
		copy(p.w, p.w[1:])
		p.w[m.L-1] = nnReal(dhat)
	}
	return nil
}

// nnForward1 runs one window through the network with matrix-vector products.
func (m *nnModel) nnForward1(p *nnPredScratch) float64 {
	L, H, A, G := m.L, m.H, 1+m.H, 4*m.H
	for d := 0; d < m.nDir; d++ {
		W := nnMat{Rows: A, Cols: G, Stride: G, Data: m.nnW(d)}
		bias := m.params[m.nnBOff(d) : m.nnBOff(d)+G]
		clear(p.a)
		clear(p.c)
		for t := 0; t < L; t++ {
			src := t
			if d == 1 {
				src = L - 1 - t
			}
			p.a[0] = p.w[src]
			copy(p.z, bias)
			nnGemv(blas.Trans, 1, W, p.a, 1, p.z)
			z := p.z
			for j := 0; j < H; j++ {
				c := nnSigmoid(z[H+j])*p.c[j] + nnSigmoid(z[j])*nnTanh(z[2*H+j])
				p.c[j] = c
				p.a[1+j] = nnSigmoid(z[3*H+j]) * nnTanh(c)
			}
		}
		copy(p.hcat[d*H:(d+1)*H], p.a[1:])
	}
	y := float64(m.params[m.nnByOff()])
	for j, w := range m.params[m.nnWyOff():m.nnByOff()] {
		y += float64(w * p.hcat[j])
	}
	return y
}
