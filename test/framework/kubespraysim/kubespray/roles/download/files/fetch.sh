# Reads "ca url" lines (ca "-": the system trust store) and fetches each url with the host's
# curl, as get_url (files) and containerd (image manifests, in the media types it accepts)
# do on a node. Prints a line per failure, then the bytes fetched.
total=0
while read -r ca url; do
	case $url in */manifests/*) accept='application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json' ;; *) accept='*/*' ;; esac
	if [ "$ca" != - ] && [ ! -f "$ca" ]; then echo "$url: the mirror's ca $ca does not exist on the host"; continue; fi
	if [ "$ca" = - ]; then n=$(curl -fsS -H "Accept: $accept" -o /dev/null -w '%{size_download}' "$url" 2>&1)
	else n=$(curl -fsS --cacert "$ca" -H "Accept: $accept" -o /dev/null -w '%{size_download}' "$url" 2>&1); fi || {
		echo "$url: $(printf '%s\n' "$n" | grep '^curl:')"
		continue
	}
	total=$((total + n))
done
echo "$total"
