package forecast

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// Persistable is implemented by models that can be saved with Save and restored with Load.
// MarshalBinary returns the model's learned state (weights, scaling, chosen order);
// UnmarshalBinary restores it into a model built from the saved Config and must reject state
// whose shape does not match that Config.
type Persistable interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// Configured is implemented by models that report their Config, so that Save can store it
// and Load can rebuild the same model. A model without it is saved with the zero Config
// (all defaults).
type Configured interface {
	Config() Config
}

// ErrModelFile is wrapped by every error Load returns for a file that is not a valid model:
// bad magic, truncation, checksum mismatch, unknown format version, mismatched model or shape.
var ErrModelFile = errors.New("invalid model file")

// psMagic starts every model file; psVersion is the only layout this build reads. The file is
//
//	magic[8] | version u16 | name length u16 | name | config length u32 | config (JSON) |
//	state length u32 | state (MarshalBinary) | CRC-32C u32 of everything before it
//
// in little-endian order. The checksum is last in every version, so Load verifies it before
// trusting any field, including the version.
const (
	psMagic     = "DEBIFCST"
	psVersion   = 1
	psMaxFile   = 256 << 20 // a BiLSTM with 1000 hidden units is ≈65 MB
	psHeaderMin = len(psMagic) + 2 + 2 + 4 + 4 + 4
)

var psTable = crc32.MakeTable(crc32.Castagnoli)

// Save writes f in debi's versioned model format. Models that do not implement Persistable
// give an error naming the model.
func Save(w io.Writer, f Forecaster) error {
	p, ok := f.(Persistable)
	if !ok {
		return fmt.Errorf("model %s cannot be saved: it does not implement forecast.Persistable", f.Name())
	}
	var cfg Config
	if c, ok := f.(Configured); ok {
		cfg = c.Config()
	}
	cj, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("save %s: config: %w", f.Name(), err)
	}
	state, err := p.MarshalBinary()
	if err != nil {
		return fmt.Errorf("save %s: %w", f.Name(), err)
	}
	name := f.Name()
	if len(name) > math.MaxUint16 || len(cj) > math.MaxUint32 || len(state) > psMaxFile {
		return fmt.Errorf("save %s: model too large for the file format", name)
	}
	if _, err := w.Write(psEncode(psVersion, name, cj, state)); err != nil {
		return fmt.Errorf("save %s: %w", name, err)
	}
	return nil
}

// psEncode lays out one model file.
func psEncode(version uint16, name string, cfg, state []byte) []byte {
	var buf bytes.Buffer
	buf.WriteString(psMagic)
	le := binary.LittleEndian
	buf.Write(le.AppendUint16(nil, version))
	buf.Write(le.AppendUint16(nil, uint16(len(name))))
	buf.WriteString(name)
	buf.Write(le.AppendUint32(nil, uint32(len(cfg))))
	buf.Write(cfg)
	buf.Write(le.AppendUint32(nil, uint32(len(state))))
	buf.Write(state)
	buf.Write(le.AppendUint32(nil, crc32.Checksum(buf.Bytes(), psTable)))
	return buf.Bytes()
}

// Load reads a model written by Save: it checks magic, checksum and version, rebuilds the
// model by name from the saved Config, and restores its state.
func Load(r io.Reader) (Forecaster, error) {
	b, err := io.ReadAll(io.LimitReader(r, psMaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if len(b) > psMaxFile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrModelFile, psMaxFile)
	}
	if len(b) < len(psMagic) || string(b[:len(psMagic)]) != psMagic {
		return nil, fmt.Errorf("%w: not a debi model (bad magic)", ErrModelFile)
	}
	if len(b) < psHeaderMin {
		return nil, fmt.Errorf("%w: truncated (%d bytes)", ErrModelFile, len(b))
	}
	le := binary.LittleEndian
	body, sum := b[:len(b)-4], le.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, psTable); got != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (file says %08x, content gives %08x): corrupt or truncated", ErrModelFile, sum, got)
	}
	rd := psReader{b: body[len(psMagic):]}
	if v := rd.u16(); v != psVersion {
		return nil, fmt.Errorf("%w: unknown format version %d (this build reads %d)", ErrModelFile, v, psVersion)
	}
	name := string(rd.bytes(int(rd.u16())))
	cj := rd.bytes(int(rd.u32()))
	state := rd.bytes(int(rd.u32()))
	if rd.err != nil || len(rd.b) != 0 {
		return nil, fmt.Errorf("%w: malformed header", ErrModelFile)
	}
	var cfg Config
	if err := json.Unmarshal(cj, &cfg); err != nil {
		return nil, fmt.Errorf("%w: config of %s: %v", ErrModelFile, name, err)
	}
	f, err := New(name, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModelFile, err)
	}
	p, ok := f.(Persistable)
	if !ok {
		return nil, fmt.Errorf("%w: model %s cannot be loaded: it does not implement forecast.Persistable", ErrModelFile, name)
	}
	if err := p.UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModelFile, name, err)
	}
	return f, nil
}

// psReader decodes little-endian fields and remembers the first overrun, so decoders check
// one error at the end instead of every field.
type psReader struct {
	b   []byte
	err error
}

func (r *psReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errors.New("truncated state")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *psReader) bytes(n int) []byte { return r.take(n) }

func (r *psReader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *psReader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *psReader) f64() float64 {
	if b := r.take(8); b != nil {
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return 0
}

// f64s reads a length-prefixed float64 slice, refusing lengths the remaining bytes cannot hold.
func (r *psReader) f64s() []float64 {
	n := int(r.u32())
	if r.err == nil && n > len(r.b)/8 {
		r.err = errors.New("truncated state")
	}
	if r.err != nil {
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = r.f64()
	}
	return out
}

// done returns the first decoding error, or an error if bytes are left over.
func (r *psReader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d unexpected trailing bytes", len(r.b))
	}
	return nil
}

func psPutF64(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

func psPutF64s(b []byte, v []float64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = psPutF64(b, x)
	}
	return b
}

func psPutBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// MarshalBinary stores the direction count, shape, fit flag, scaling and weights. Adam's
// moments are not stored: a loaded model retrains with a fresh optimiser state.
func (m *nnModel) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 32+8*len(m.params))
	b = append(b, byte(m.nDir))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.L))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.H))
	b = psPutBool(b, m.fitted)
	b = psPutF64(b, m.lo)
	b = psPutF64(b, m.span)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.params)))
	for _, v := range m.params {
		b = psPutF64(b, float64(v))
	}
	return b, nil
}

// UnmarshalBinary restores state saved by MarshalBinary into a model of the same kind and
// shape.
func (m *nnModel) UnmarshalBinary(data []byte) error {
	r := psReader{b: data}
	nDir := r.take(1)
	L, H := int(r.u32()), int(r.u32())
	fitted := r.take(1)
	lo, span := r.f64(), r.f64()
	params := r.f64s()
	if err := r.done(); err != nil {
		return err
	}
	if int(nDir[0]) != m.nDir {
		return fmt.Errorf("model mismatch: state has %d direction(s), %s has %d", nDir[0], m.Name(), m.nDir)
	}
	if L != m.L || H != m.H || len(params) != len(m.params) {
		return fmt.Errorf("shape mismatch: state has window %d, hidden %d, %d weights; config gives window %d, hidden %d, %d weights",
			L, H, len(params), m.L, m.H, len(m.params))
	}
	if fitted[0] > 1 || !(span > 0) || math.IsInf(span, 0) || math.IsNaN(lo) || math.IsInf(lo, 0) {
		return fmt.Errorf("invalid scaling state (lo %v, span %v)", lo, span)
	}
	for i, v := range params {
		// Checked after conversion: a float64 weight may overflow the float32 build.
		if w := float64(nnReal(v)); math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("weight %d is %v", i, v)
		}
	}
	m.fitted, m.lo, m.span = fitted[0] == 1, lo, span
	for i, v := range params {
		m.params[i] = nnReal(v)
	}
	clear(m.adamM)
	clear(m.adamV)
	m.adamT = 0
	return nil
}

// MarshalBinary stores the chosen order, standardisation and coefficients. The warm-start
// cache of the other orders is not stored.
func (m *arModel) MarshalBinary() ([]byte, error) {
	b := []byte{byte(m.order.p), byte(m.order.d), byte(m.order.q)}
	b = psPutBool(b, m.fitted)
	b = psPutF64(b, m.mean)
	b = psPutF64(b, m.scale)
	b = psPutF64(b, m.aic)
	return psPutF64s(b, m.coef), nil
}

// UnmarshalBinary restores state saved by MarshalBinary, checking the order against the grid
// and the coefficient count against the order.
func (m *arModel) UnmarshalBinary(data []byte) error {
	r := psReader{b: data}
	o := r.take(3)
	fitted := r.take(1)
	mean, scale, aic := r.f64(), r.f64(), r.f64()
	coef := r.f64s()
	if err := r.done(); err != nil {
		return err
	}
	ord := arOrder{int(o[0]), int(o[1]), int(o[2])}
	if ord.p > arMaxP || ord.d > arMaxD || ord.q > arMaxQ {
		return fmt.Errorf("order %v outside the grid", ord)
	}
	if fitted[0] > 1 {
		return fmt.Errorf("invalid fit flag %d", fitted[0])
	}
	if fitted[0] == 1 && len(coef) != 1+ord.p+ord.q {
		return fmt.Errorf("shape mismatch: %v needs %d coefficients, state has %d", ord, 1+ord.p+ord.q, len(coef))
	}
	if fitted[0] == 1 && (!(scale > 0) || math.IsInf(scale, 0) || math.IsNaN(mean) || math.IsInf(mean, 0)) {
		return fmt.Errorf("invalid standardisation (mean %v, scale %v)", mean, scale)
	}
	for i, v := range coef {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("coefficient %d is %v", i, v)
		}
	}
	m.order, m.fitted, m.mean, m.scale, m.aic, m.coef = ord, fitted[0] == 1, mean, scale, aic, coef
	if m.fitted {
		m.warm.set(ord, coef)
	}
	return nil
}
