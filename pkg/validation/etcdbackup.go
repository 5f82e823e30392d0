package validation

import (
	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ValidateEtcdBackup checks spec.etcdBackup.schedule as the controller reads it (cron's
// standard five fields or a descriptor): the CRD's pattern admits the shape, not the values
// (a minute of 61, a day of the week of 8).
func ValidateEtcdBackup(p *bpav1.Provisioning) field.ErrorList {
	b := p.Spec.EtcdBackup
	if b == nil || b.Schedule == "" {
		return nil
	}
	if _, err := cron.ParseStandard(b.Schedule); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "etcdBackup", "schedule"), b.Schedule, err.Error())}
	}
	return nil
}
