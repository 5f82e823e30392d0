# SIMULATED-site instrument, not part of kubespray: when BPA_SIM_RECORD_DIR is set, every run
# is recorded as it starts, in the layout `bpa plan --output-dir` writes (NN-<operation>/argv.json,
# hosts.ini, vars.yaml), so tests can compare what run-kubespray really ran with the plan.
import json
import os
import shutil
import sys
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
    name: bpa_record
    type: aggregate
    short_description: records each ansible-playbook run for BPA's test rig
    description: Writes argv.json, hosts.ini and vars.yaml of the run under BPA_SIM_RECORD_DIR.
'''


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'bpa_record'
    CALLBACK_NEEDS_ENABLED = True

    _start = None

    def v2_playbook_on_start(self, playbook):
        self._start = time.monotonic_ns()
        image = os.environ.get('BPA_SIM_KUBESPRAY_IMAGE', '')
        ref = image.split('@')[0]
        release = ref.rsplit(':', 1)[-1] if ':' in ref.rsplit('/', 1)[-1] else 'unknown'
        self._display.display('SIMULATED kubespray %s %s: the stand-in playbooks (test/framework/kubespraysim/kubespray), '
                              'run by the real ansible-playbook' % (release, os.path.basename(sys.argv[-1])))
        root = os.environ.get('BPA_SIM_RECORD_DIR')
        if not root:
            return
        argv = ['ansible-playbook'] + sys.argv[1:]
        inventory = varsfile = None
        for i, a in enumerate(argv):
            if argv[i - 1] == '-i':
                inventory = a
            elif argv[i - 1] == '-e' and a.startswith('@'):
                varsfile = a[1:]
        op = os.path.basename(argv[-1])
        op = op[:-len('.yml')] if op.endswith('.yml') else op
        os.makedirs(root, exist_ok=True)
        # NN-<op>, numbered on past 99 (three digits and more).
        done = [d for d in os.listdir(root) if d.split('-', 1)[0].isdigit() and '-' in d]
        out = os.path.join(root, '%02d-%s' % (len(done) + 1, op))
        os.makedirs(out)
        with open(os.path.join(out, 'argv.json'), 'w') as f:
            f.write(json.dumps(argv, indent=2) + '\n')
        for src, name in ((inventory, 'hosts.ini'), (varsfile, 'vars.yaml')):
            if src:
                shutil.copyfile(src, os.path.join(out, name))

    def v2_playbook_on_stats(self, stats):
        # How long the run took (ns), appended beside the record directory: the benchmarks
        # subtract kubespray's own time from a run's.
        root = os.environ.get('BPA_SIM_RECORD_DIR')
        if root and self._start is not None:
            with open(root + '.ns', 'a') as f:
                f.write('%d\n' % (time.monotonic_ns() - self._start))
