#!/usr/bin/env bash
# kubespray-check: run a kubespray checkout's own inventory checks (its validate_inventory
# role, with kubespray_defaults) with the real ansible-playbook against what `bpa plan`
# writes for every example. Not part of `make test`: CI cannot fetch kubespray, and the
# SIMULATED kubespray's rules (pkg/kubespray) are what CI checks. Needs ansible-core with
# the ansible.utils collection and python netaddr (kubespray's own requirements; Debian's
# `ansible` and `python3-netaddr` packages).
#
#   make kubespray-check KUBESPRAY_DIR=/path/to/kubespray   (a checkout of v2.28 or later)
set -euo pipefail
: "${KUBESPRAY_DIR:?set KUBESPRAY_DIR to a kubespray checkout}"
KUBESPRAY_DIR=$(cd "$KUBESPRAY_DIR" && pwd)
BPA=${BPA:-bin/bpa}
if [ ! -d "$KUBESPRAY_DIR/roles/validate_inventory" ]; then
  echo "kubespray-check: $KUBESPRAY_DIR has no roles/validate_inventory (kubespray v2.27 and older check the inventory in kubernetes/preinstall, after gathering facts from the hosts)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# BPA's own playbook: the group names kubespray's boilerplate.yml maps (the KUD layout's
# kube-master, kube-node, k8s-cluster), then kubespray's defaults and its checks.
cat > "$work/check.yml" <<'YAML'
- name: Map the KUD layout's legacy group names as kubespray does
  hosts: all
  gather_facts: false
  tasks:
    - name: Add each host to the current name of each legacy group it is in
      ansible.builtin.group_by:
        key: "{{ item.new if item.old in group_names else '_bpa_unmapped' }}"
      loop:
        - {old: kube-master, new: kube_control_plane}
        - {old: kube-node, new: kube_node}
        - {old: k8s-cluster, new: k8s_cluster}
- name: kubespray's inventory checks on BPA's plan
  hosts: all
  gather_facts: false
  roles:
    - kubespray_defaults
    - validate_inventory
YAML
failed=0
for cr in examples/provisioning-*.yaml; do
  name=$(basename "$cr" .yaml)
  "$BPA" plan -f "$cr" --bmh "examples/bmh/$name.yaml" --output-dir "$work/$name" >/dev/null
  for op in "$work/$name"/[0-9][0-9]-*; do
    # The operation's own -e objects (playbook variables, connection settings) as planned.
    mapfile -t extra < <(python3 -c 'import json,sys
a=json.load(open(sys.argv[1]))
for i,x in enumerate(a[:-1]):
    if x=="-e" and not a[i+1].startswith("@"): print(a[i+1])' "$op/argv.json")
    args=(-i "$op/hosts.ini" -e "@$op/vars.yaml")
    for e in "${extra[@]}"; do args+=(-e "$e"); done
    echo "== $name $(basename "$op")"
    if ! (cd "$KUBESPRAY_DIR" && ANSIBLE_ROLES_PATH="$KUBESPRAY_DIR/roles" ANSIBLE_INVENTORY_ENABLED=ini \
        ansible-playbook "${args[@]}" -e ansible_connection=local "$work/check.yml"); then
      failed=1
    fi
  done
done
exit $failed
