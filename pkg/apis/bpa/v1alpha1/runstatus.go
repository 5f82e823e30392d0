package v1alpha1

// GetRunStatus gives the controller one view of every runnable kind's status.
func (p *Provisioning) GetRunStatus() *RunStatus { return &p.Status.RunStatus }

// GetRunStatus gives the controller one view of every runnable kind's status.
func (s *Software) GetRunStatus() *RunStatus { return &s.Status.RunStatus }
