package kubespray

import "regexp"

// ControllerVars are the variables that make kubespray act on the Ansible controller (the
// run-kubespray container, which holds the cluster's SSH key) rather than on the hosts: each
// turns on, or chooses what runs or is written in, a task kubespray delegates to localhost
// (or runs with connection: local) at v2.27 and v2.28. A CR may not set them; the reason
// cites the task. Read from every `delegate_to: localhost`, `connection: local` and
// `hosts: localhost` of roles/ and playbooks/ at v2.27.0, v2.27.1, v2.28.0 and v2.28.1; the
// others (roles/kubernetes/preinstall/tasks/0090-etchosts.yml "Hosts | create hosts list
// from inventory", network_facts' and v2.27 kubespray-defaults' no_proxy.yml) are set_fact
// tasks, which run in Ansible itself and no module, and bastion-ssh-config needs a bastion
// group, which BPA's inventory never has. ansible.posix.synchronize tasks (download_run_once,
// download_force_cache) run rsync on the controller, and copy what one node served to every
// node.
var ControllerVars = map[string]string{
	"kubeconfig_localhost":            `roles/kubernetes/client/tasks/main.yml "Create kube artifacts dir" and "Write admin kubeconfig on ansible host" (delegate_to: localhost)`,
	"kubectl_localhost":               `roles/kubernetes/client/tasks/main.yml "Copy kubectl binary to ansible host" and "Create helper script kubectl.sh on ansible host" (delegate_to: localhost)`,
	"artifacts_dir":                   `roles/kubernetes/client/tasks/main.yml writes admin.conf, kubectl and kubectl.sh there, on the ansible host`,
	"download_localhost":              `roles/download/tasks/prep_download.yml "Prep_download | On localhost, check if user has access to the container runtime without using sudo" runs a shell command on localhost`,
	"image_info_command_on_localhost": `roles/download/tasks/prep_download.yml "Prep_download | On localhost, check if user has access to the container runtime without using sudo" runs it with shell on localhost`,
	"image_command_tool_on_localhost": `kubespray_defaults builds image_info_command_on_localhost from it, which roles/download/tasks/prep_download.yml runs with shell on localhost`,
	"download_run_once":               `roles/download/tasks/download_file.yml "Download_file | Copy file back to ansible host file cache" and download_container.yml "Download_container | Copy image to ansible host cache" (synchronize: rsync on the ansible host, with the cluster's SSH key, from one node to every node)`,
	"download_force_cache":            `roles/download/tasks/download_file.yml "Download_file | Create local cache directory" (delegate_to: localhost) and "Download_file | Copy file back to ansible host file cache" (synchronize to the ansible host)`,
	"download_cache_dir":              `roles/download/tasks/prep_download.yml "Prep_download | Create local cache for files and images on control node" and download_file.yml "Download_file | Create local cache directory" (delegate_to: localhost)`,
}

// PythonInterpreter is what ansible_python_interpreter may be: a plain path of a Python 3
// interpreter, or one of Ansible's discovery modes. Ansible runs the variable's value as a
// command line wherever it executes a module, and extra vars apply to the implicit
// localhost too: v2.28's playbooks/remove_node.yml "Validate nodes for removal" play
// (hosts: localhost) gathers facts there, so any other value would run in the run-kubespray
// container on every removal.
var PythonInterpreter = regexp.MustCompile(`^(/usr(/local)?/bin/python3([.][0-9]{1,2})?|/usr/libexec/platform-python|auto|auto_silent|auto_legacy|auto_legacy_silent)$`)
