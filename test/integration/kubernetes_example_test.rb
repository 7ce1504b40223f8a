# frozen_string_literal: true

require "test_helper"
require "psych"
require "support/fake_cgroup"

# examples/kubernetes, checked as Kubernetes would wire it (no cluster
# here): kinds and API versions, selectors that match the pod template,
# ports, probes and resources, every referenced ConfigMap, key, volume and
# container, a grace period long enough for the drain and narwhal's
# graceful stop. The ConfigMap's narwhal.rb loads as narwhal's
# configuration (workers from a faked cgroup CPU quota), and run as a real
# narwhal it answers the probes on the control listener and drains on TERM:
# /ready turns 503 at once, new connections are served during drain_delay,
# a request in progress finishes, and narwhal exits 0.
class KubernetesExampleTest < Minitest::Test
  DIR = File.join(Narwhal::ServerProcess::ROOT, "examples", "kubernetes")
  API_VERSIONS = { "Deployment" => "apps/v1", "Service" => "v1", "ConfigMap" => "v1",
                   "NetworkPolicy" => "networking.k8s.io/v1" }.freeze

  def objects
    @objects ||= Dir[File.join(DIR, "*.yaml")].sort.to_h do |path|
      text = File.read(path)
      assert_equal 1, Psych.parse_stream(text).children.size, "#{path}: one object per file"
      [File.basename(path), Psych.safe_load(text)]
    end
  end

  def object(kind)
    found = objects.values.select { |o| o["kind"] == kind }
    assert_equal 1, found.size, "one #{kind}"
    found.first
  end

  def pod_spec
    object("Deployment").dig("spec", "template", "spec")
  end

  def container
    containers = pod_spec["containers"]
    assert_equal 1, containers.size
    containers.first
  end

  def port_names
    container["ports"].to_h { |p| [p["name"], p["containerPort"]] }
  end

  def config_map_text
    object("ConfigMap").dig("data", "narwhal.rb")
  end

  def test_each_file_is_one_object_of_a_known_kind_and_api_version
    assert_equal %w[configmap.yaml deployment.yaml networkpolicy.yaml service.yaml], objects.keys
    objects.each do |file, obj|
      assert_equal API_VERSIONS.fetch(obj["kind"]), obj["apiVersion"], file
      assert_match(/\A[a-z0-9]([-a-z0-9]*[a-z0-9])?\z/, obj.dig("metadata", "name"), file)
    end
  end

  def test_selectors_match_the_pod_template_labels
    labels = object("Deployment").dig("spec", "template", "metadata", "labels")
    selector = object("Deployment").dig("spec", "selector", "matchLabels")
    refute_empty selector
    assert_equal selector, labels.slice(*selector.keys), "Deployment selector"
    service_selector = object("Service").dig("spec", "selector")
    refute_empty service_selector
    assert_equal service_selector, labels.slice(*service_selector.keys), "Service selector"
  end

  def test_the_service_targets_a_container_port
    object("Service").dig("spec", "ports").each do |port|
      target = port["targetPort"]
      if target.is_a?(String)
        assert port_names.key?(target), "targetPort #{target} is no container port name"
      else
        assert_includes port_names.values, target
      end
    end
  end

  def test_probes_use_container_ports_and_resources_are_set
    %w[readinessProbe livenessProbe startupProbe].each do |probe|
      spec = container.fetch(probe)
      action = spec["httpGet"] || spec["tcpSocket"]
      refute_nil action, "#{probe} checks HTTP or TCP"
      assert port_names.key?(action["port"]) || port_names.value?(action["port"]), "#{probe} port #{action['port']}"
    end
    %w[readinessProbe livenessProbe startupProbe].each do |probe|
      assert_equal "control", container.dig(probe, "httpGet", "port"), "#{probe} asks the master, not a worker"
    end
    assert_equal "/health", container.dig("livenessProbe", "httpGet", "path")
    assert_equal "/ready", container.dig("readinessProbe", "httpGet", "path")
    %w[requests limits].each do |kind|
      %w[cpu memory].each { |res| refute_nil container.dig("resources", kind, res), "resources.#{kind}.#{res}" }
    end
  end

  def test_referenced_config_map_volume_and_container_exist
    volumes = pod_spec["volumes"].to_h { |v| [v["name"], v] }
    container["volumeMounts"].each { |m| assert volumes.key?(m["name"]), "volume #{m['name']}" }
    config_maps = objects.values.select { |o| o["kind"] == "ConfigMap" }.to_h { |o| [o.dig("metadata", "name"), o] }
    volumes.each_value do |v|
      next unless v["configMap"]

      assert config_maps.key?(v.dig("configMap", "name")), "ConfigMap #{v.dig('configMap', 'name')}"
    end
    # narwhal -c names a key of the mounted ConfigMap
    config_path = container["command"][container["command"].index("-c") + 1]
    mount = container["volumeMounts"].find { |m| config_path.start_with?("#{m['mountPath']}/") }
    refute_nil mount, "#{config_path} is on a mounted volume"
    map = config_maps.fetch(volumes.fetch(mount["name"]).dig("configMap", "name"))
    assert map["data"].key?(File.basename(config_path))
    # the control listener is the container's control port, and what the
    # scrape annotations name
    assert_equal "0.0.0.0:#{port_names.fetch('control')}", config_map_text[/^control_listen "(.*)"$/, 1]
    annotations = object("Deployment").dig("spec", "template", "metadata", "annotations")
    assert_equal port_names.fetch("control").to_s, annotations["prometheus.io/port"]
    assert_equal "/metrics", annotations["prometheus.io/path"]
  end

  # The control listener binds all interfaces (the kubelet probes the pod's
  # address) and has no authentication: the NetworkPolicy selects the pods
  # and lets only the named scraper reach the control port (the kubelet,
  # on the node, is always let through), while the app's port stays open
  # to the Service. The ConfigMap's comment names the policy.
  def test_a_network_policy_lets_only_the_scraper_reach_the_control_port
    policy = object("NetworkPolicy")
    labels = object("Deployment").dig("spec", "template", "metadata", "labels")
    selector = policy.dig("spec", "podSelector", "matchLabels")
    refute_empty selector
    assert_equal selector, labels.slice(*selector.keys), "the policy selects the pods"
    assert_includes policy.dig("spec", "policyTypes"), "Ingress"
    rules = policy.dig("spec", "ingress")
    by_port = port_names.keys.to_h do |name|
      [name, rules.select { |r| r["ports"].any? { |p| [name, port_names[name]].include?(p["port"]) } }]
    end
    assert_equal 1, by_port["http"].size, "one rule for the app's port"
    control = by_port["control"]
    assert_equal 1, control.size, "one rule for the control port"
    peers = control.first["from"]
    refute_empty peers.to_a, "the control port is not open to every source"
    peers.each do |peer|
      assert_nil peer["ipBlock"], "no address range: a pod or namespace selector"
      refute_empty peer.fetch("podSelector", {}).fetch("matchLabels", {}), "a selector naming the scraper's pods"
    end
    assert_includes config_map_text, policy.dig("metadata", "name"), "the control_listen comment names the policy"
  end

  def test_the_grace_period_covers_the_drain_and_a_graceful_stop
    assert_nil container["lifecycle"], "TERM drains by itself: no preStop hook"
    assert_match(/^term_graceful true$/, config_map_text)
    drain_delay = Integer(config_map_text[/^drain_delay (\d+)$/, 1])
    timeout = Integer(config_map_text[/^timeout (\d+)$/, 1])
    refute_match(/^graceful_timeout/, config_map_text, "graceful_timeout is timeout + #{Narwhal::Master::KILL_AFTER}")
    grace = pod_spec["terminationGracePeriodSeconds"]
    assert_operator grace, :>, drain_delay + timeout + Narwhal::Master::KILL_AFTER
  end

  def test_the_config_map_is_a_narwhal_config_listening_on_the_container_port
    Tempfile.create(["narwhal", ".rb"]) do |f|
      f.write(config_map_text)
      f.flush
      config = with_cgroup_quota("300000 100000") { Narwhal::Configurator.new(file: f.path) }
      assert_equal ["0.0.0.0:#{port_names.fetch('http')}"], config[:listeners].map(&:first)
      assert_equal 3, config[:worker_processes], "3 CPUs of quota"
      assert config[:preload_app]
      assert config[:term_graceful]
    end
  end

  # A container whose cgroup allows `cpu_max` ("quota period") of CPU.
  def with_cgroup_quota(cpu_max, &block)
    Dir.mktmpdir("narwhal-cgroup-root") do |root|
      Narwhal::FakeCgroup.v2(root, path: "/kubepods/pod1/web", cpus: "0-7")
                         .write("/sys/fs/cgroup/kubepods/pod1/web/cpu.max", "#{cpu_max}\n")
      with_env("NARWHAL_CGROUP_ROOT" => root, "WEB_CONCURRENCY" => nil, &block)
    end
  end

  def control_get(socket_path, path)
    client = Narwhal::RawClient.new(UNIXSocket.new(socket_path))
    client.write("GET #{path} HTTP/1.1\r\nhost: x\r\n\r\n")
    client.read_response(timeout: 10)
  ensure
    client&.close
  end

  SLOW_APP = <<~'RU'
    run lambda { |env|
      if env["PATH_INFO"] == "/slow"
        File.write("slow.started", "")
        sleep 1.5
      end
      [200, { "content-type" => "text/plain" }, ["done #{env['PATH_INFO']}"]]
    }
  RU

  def test_term_drains_with_probes_on_the_control_listener
    control = File.join(Dir.mktmpdir("narwhal-k8s"), "control.sock")
    config = config_map_text.sub('listen "0.0.0.0:8080"', 'listen "127.0.0.1:0"')
                            .sub(/^control_listen .*$/, "control_listen #{control.inspect}")
                            .sub(/^drain_delay \d+$/, "drain_delay 4")
    assert_equal 3, config.scan(/127\.0\.0\.1:0|control\.sock|drain_delay 4/).size
    server = with_cgroup_quota("200000 100000") do
      Narwhal::ServerProcess.start(app: SLOW_APP, config: config, workers: 2)
    end
    wait_until(timeout: 15, message: "/ready") { control_get(control, "/ready").status == 200 }
    assert_equal 200, control_get(control, "/health").status
    assert_match(/worker_processes :auto chose 2: CPU quota 2 CPU\(s\)/, server.log)
    slow = Thread.new { server.get("/slow", timeout: 30) }
    wait_until(timeout: 15, message: "slow request started") { File.exist?(File.join(server.dir, "slow.started")) }
    server.signal(:TERM)
    wait_until(timeout: 5, message: "/ready turns 503") { control_get(control, "/ready").status == 503 }
    # the drain: the load balancer may still send new connections
    during = server.get("/during", timeout: 30)
    assert_equal [200, "done /during"], [during.status, during.body]
    assert_equal 200, control_get(control, "/health").status, "the master lives on while draining"
    response = slow.value
    assert_equal [200, "done /slow"], [response.status, response.body]
    assert server.wait_exit(timeout: 40).success?, "narwhal exit status"
    assert_match(/TERM received: draining, serving for 4s \(drain_delay\)/, server.log)
    assert_match(/drain_delay over: stopping workers gracefully/, server.log)
  ensure
    server&.stop
    FileUtils.rm_rf(File.dirname(control)) if control
  end
end
