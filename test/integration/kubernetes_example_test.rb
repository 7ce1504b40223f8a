# frozen_string_literal: true

require "test_helper"
require "psych"
require "open3"

# examples/kubernetes, checked as Kubernetes would wire it (no cluster
# here): kinds and API versions, selectors that match the pod template,
# ports, probes and resources, every referenced ConfigMap, key, volume and
# container, a grace period long enough for narwhal's graceful stop. The
# ConfigMap's narwhal.rb loads as narwhal's configuration, and the preStop
# command, run against a real narwhal, lets a request in progress finish
# and returns only once narwhal has exited.
class KubernetesExampleTest < Minitest::Test
  DIR = File.join(Narwhal::ServerProcess::ROOT, "examples", "kubernetes")
  API_VERSIONS = { "Deployment" => "apps/v1", "Service" => "v1", "ConfigMap" => "v1" }.freeze

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
    assert_equal %w[configmap.yaml deployment.yaml service.yaml], objects.keys
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
    assert container["livenessProbe"].key?("tcpSocket"), "liveness is TCP: a busy app is not restarted"
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
    # WEB_CONCURRENCY comes from this container's CPU limit
    ref = container["env"].find { |e| e["name"] == "WEB_CONCURRENCY" }.dig("valueFrom", "resourceFieldRef")
    assert_equal container["name"], ref["containerName"]
    assert_equal "limits.cpu", ref["resource"]
  end

  def test_the_grace_period_covers_pre_stop_and_a_graceful_stop
    script = container.dig("lifecycle", "preStop", "exec", "command").last
    assert_match(/kill -QUIT \$pid/, script)
    pre_stop_sleep = Integer(script[/sleep (\d+);/, 1])
    timeout = Integer(config_map_text[/^timeout (\d+)$/, 1])
    grace = pod_spec["terminationGracePeriodSeconds"]
    assert_operator grace, :>, pre_stop_sleep + timeout + Narwhal::Master::KILL_AFTER
  end

  def test_the_config_map_is_a_narwhal_config_listening_on_the_container_port
    Tempfile.create(["narwhal", ".rb"]) do |f|
      f.write(config_map_text)
      f.flush
      config = with_env("WEB_CONCURRENCY" => "3") { Narwhal::Configurator.new(file: f.path) }
      assert_equal ["0.0.0.0:#{port_names.fetch('http')}"], config[:listeners].map(&:first)
      assert_equal 3, config[:worker_processes]
      assert config[:preload_app]
    end
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
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

  def test_pre_stop_lets_a_request_finish_and_returns_once_narwhal_exited
    config = config_map_text.sub('listen "0.0.0.0:8080"', 'listen "127.0.0.1:0"')
    refute_equal config_map_text, config
    server = Narwhal::ServerProcess.start(app: SLOW_APP, config: config, workers: 2, env: { "WEB_CONCURRENCY" => "2" })
    slow = Thread.new do
      client = server.connect
      client.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
      client.read_response(timeout: 30)
    end
    wait_until(timeout: 15, message: "slow request started") { File.exist?(File.join(server.dir, "slow.started")) }
    # preStop as written, for this narwhal's pid and without the wait for
    # the endpoints
    command = container.dig("lifecycle", "preStop", "exec", "command")
    script = command.last.sub("pid=1;", "pid=#{server.pid};").sub(/sleep \d+;/, "sleep 0;")
    refute_equal command.last, script
    # PID 1's exit ends the container; here the test reaps it
    reaper = Thread.new { [server.wait_exit(timeout: 40), now] }
    out, status = Open3.capture2e(*command[0..-2], script)
    returned_at = now
    assert status.success?, out
    exit_status, exited_at = reaper.value
    assert exit_status.success?, "narwhal exit status"
    assert_operator exited_at, :<=, returned_at, "preStop returned before narwhal exited"
    response = slow.value
    assert_equal 200, response.status
    assert_equal "done /slow", response.body
    assert_match(/QUIT received: stopping workers gracefully/, server.log)
  ensure
    server&.stop
  end
end
