// Command crd-nullable marks the values of Provisioning's masters/workers maps nullable.
//
// controller-gen has no marker for a map's value schema, and without `nullable: true` the
// apiserver prunes ICN's `- master-1:` (a null value) down to an empty map, which then fails
// the one-key rule. `make manifests` runs this right after controller-gen.
package main

import (
	"bytes"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crd-nullable:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		for _, role := range []string{"masters", "workers"} {
			list, ok := spec.Properties[role]
			if !ok || list.Items == nil || list.Items.Schema == nil || list.Items.Schema.AdditionalProperties == nil {
				return fmt.Errorf("%s: spec.%s is not a list of maps", path, role)
			}
			list.Items.Schema.AdditionalProperties.Schema.Nullable = true
			spec.Properties[role] = list
		}
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	// controller-gen writes a document marker and no status; keep the file in its style.
	out = bytes.Replace(out, []byte("status:\n  acceptedNames:\n    kind: \"\"\n    plural: \"\"\n  conditions: null\n  storedVersions: null\n"), nil, 1)
	out = bytes.Replace(out, []byte("  creationTimestamp: null\n"), nil, 1)
	out = append([]byte("---\n"), out...)
	return os.WriteFile(path, out, 0o644)
}
