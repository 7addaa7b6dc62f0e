package policy

import (
	"context"

	"github.com/debi-scaler/debi/forecast"
)

// maybeTrain starts a training run when the model has never been trained and enough history
// exists, or when Retrain steps have passed since the last run.
func (r *Runner) maybeTrain(ctx context.Context) {
	box := r.model.Load()
	need := max(box.f.MinHistory(), r.cfg.LeadSteps+1)
	if len(r.history) < need || r.training.Load() {
		return
	}
	due := !box.trained || (r.cfg.Retrain > 0 && r.steps-r.lastTrainS >= r.cfg.Retrain)
	if s, ok := box.f.(forecast.FitScheduler); ok && s.WantsFit(len(r.history)) {
		due = true
	}
	if !due {
		return
	}
	r.lastTrainS = r.steps
	hist := append([]float64(nil), r.history...)
	clone := box.f.Clone()
	r.training.Store(true)
	run := func(ctx context.Context) {
		defer r.training.Store(false)
		rep, err := clone.Fit(ctx, hist)
		r.trainMu.Lock()
		defer r.trainMu.Unlock()
		if err != nil {
			r.finishErr = err
			return
		}
		r.model.Store(&modelBox{f: clone, trained: true})
		r.finished = &rep
	}
	if !r.cfg.AsyncTraining {
		run(ctx)
		return
	}
	// A background run outlives the step that started it: it must not stop when the step's
	// context ends, only on Close or when its own time budget runs out.
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.trainMu.Lock()
	r.cancelTrain = cancel
	r.trainMu.Unlock()
	r.trainWG.Add(1)
	go func() { defer r.trainWG.Done(); defer cancel(); run(tctx) }()
}

// Close stops a background training run, if any, and waits for it.
func (r *Runner) Close() {
	r.trainMu.Lock()
	if r.cancelTrain != nil {
		r.cancelTrain()
	}
	r.trainMu.Unlock()
	r.trainWG.Wait()
}

func (r *Runner) collectTraining(res *Result) {
	r.trainMu.Lock()
	defer r.trainMu.Unlock()
	if r.finished != nil {
		res.Training, r.finished = r.finished, nil
	}
	if r.finishErr != nil {
		res.TrainError, r.finishErr = r.finishErr, nil
		r.log.Warn("model training failed", "policy", r.cfg.Spec.Name, "model", r.cfg.Spec.Model, "err", res.TrainError)
	}
}
