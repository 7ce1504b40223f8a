# frozen_string_literal: true

require "test_helper"
require "support/fleet"
require "support/fleet/scenarios"

# A fleet: three narwhal instances, each in a network namespace of its own
# with its own address, behind a real haproxy running
# examples/haproxy-fleet.cfg (health checks on /up, narwhal's agent-check,
# observe layer4), with open-loop load through haproxy recording every
# answer. Across a rolling USR2 deploy, a deploy that cannot boot, a
# request stuck past `timeout`, a 3x overload and a graceful TERM, every
# request gets the answer it should: 200, or narwhal's own 504 for the
# stuck one and 503 for what waited past queue_deadline; no reset, no 502.
class FleetTest < Minitest::Test
  Fleet = Narwhal::Fleet
  Scenarios = Narwhal::Fleet::Scenarios
  TIMEOUT = Scenarios::TIMEOUT

  # event: its config (Scenarios::CONFIGS).
  def start_fleet(event)
    @fleet = Scenarios.fleet_for(event)
    @fleet.start
  rescue Fleet::Namespaces::Error => e
    flunk e.message
  end

  def teardown
    @fleet&.stop
  end

  def haproxy_log
    @fleet.haproxy.log
  end

  # Every request got an expected answer, and haproxy passed each one on
  # cleanly at the first try (a retry would hide a refused connect).
  def assert_none_failed(outcome, expected = [200])
    failed = outcome.failed(expected)
    troubled = @fleet.haproxy.troubled_requests
    assert_empty failed, "#{failed.size} of #{outcome.results.size} failed: #{outcome.statuses}\n#{troubled.first(10).join}"
    assert_empty troubled, "haproxy's log"
    assert_operator outcome.results.size, :>=, 40, "the load ran"
  end

  def assert_in_rotation(outcome, *names)
    names.each { |name| assert_equal ["UP"], outcome.states_of(name), "haproxy's states of #{name}" }
    refute_match(/is DOWN|is going DOWN/, haproxy_log)
  end

  def test_a_rolling_deploy_of_every_instance_fails_no_request
    start_fleet(:rolling_deploy)
    firsts = @fleet.instances.map(&:master)
    outcome = Scenarios.rolling_deploy(@fleet)
    assert_none_failed(outcome)
    assert_equal({ 1 => ["2"], 2 => ["2"], 3 => ["2"] }, outcome.facts[:versions], "every instance serves release 2")
    assert_empty firsts & @fleet.instances.map(&:master), "every instance has a new master"
    @fleet.instances.each { |i| assert_match(/upgrade succeeded: the new master pid=\d+ serves/, i.log) }
    assert_in_rotation(outcome, "app1", "app2", "app3")
  end

  def test_a_deploy_that_cannot_boot_leaves_the_old_release_serving
    start_fleet(:broken_deploy)
    outcome = Scenarios.broken_deploy(@fleet, number: 2)
    assert_none_failed(outcome)
    facts = outcome.facts
    assert_equal facts[:first_master], facts[:master], "the old master's pid file is back"
    refute facts[:oldbin]
    assert_equal ["1"], facts[:versions], "app2 serves release 1"
    log = @fleet[2].log
    assert_match(/release raises does not load \(RuntimeError\)/, log)
    assert_match(%r{upgrade_health_path: GET /up answered 500, not 200}, log)
    raises, unhealthy = facts[:releases].values_at("raises", "unhealthy").map { |r| r[:line] }
    assert_match(/exited \(exit 1\); the old master pid=#{facts[:master]} serves on/, raises)
    assert_match(/gave up: no worker could boot .*: upgrade_health_path: .*; the old master pid=#{facts[:master]} serves on/,
                 unhealthy)
    assert_in_rotation(outcome, "app1", "app2", "app3")
  end

  def test_a_request_stuck_past_timeout_gets_504_and_its_instance_stays_in_rotation
    start_fleet(:stuck_request)
    outcome = Scenarios.stuck_request(@fleet, number: 2)
    facts = outcome.facts
    assert_equal [504, "close"], facts.values_at(:status, :connection), "the stuck request's answer"
    assert_operator facts[:seconds], :>=, TIMEOUT
    assert_operator facts[:seconds], :<=, TIMEOUT + 5
    assert_match(/answered 504 to 1 request/, facts[:kill_line])
    assert_match(%r{narwhal/app2 \S+ 504 \d+ - - ---- .*"GET /stuck HTTP/1.1"}, haproxy_log, "narwhal's 504, passed on")
    assert_none_failed(outcome)
    assert_in_rotation(outcome, "app2")
    assert_operator outcome.answered_by_after(2, facts[:answered_at]), :>, 0, "app2 serves on"
  end

  # 1 worker of 1 thread each, 20 ms a request: the fleet serves about 150
  # a second; 450 a second come for 3 s.
  def test_a_3x_overload_is_served_within_queue_deadline_or_shed_fast
    start_fleet(:overload)
    outcome = Scenarios.overload(@fleet, rate: 450, seconds: 3, work_ms: 20)
    assert_none_failed(outcome, [200, 503])
    shed = outcome.with_status(503)
    assert_operator outcome.with_status(200).size, :>=, 200, "the fleet kept serving"
    assert_operator shed.size, :>=, 200, "the excess was shed"
    assert(shed.all? { |r| r.head.include?("retry-after: 1") }, "every 503 is narwhal's")
    assert_operator Fleet::Outcome.percentile(outcome.queue_times, 99), :<=, 1.1, "p99 queue time of the served"
    assert_operator Fleet::Outcome.percentile(outcome.latencies, 99), :<=, 1.5, "p99 latency of the served"
    assert_operator shed.map(&:latency).max, :<=, 1.6, "each 503 came soon after the deadline"
    assert_in_rotation(outcome, "app1", "app2", "app3") # /up's 503 past the deadline passes the check
  end

  def test_a_graceful_term_is_drained_by_haproxy_before_the_listeners_close
    start_fleet(:graceful_term)
    outcome = Scenarios.graceful_term(@fleet, number: 3)
    assert_none_failed(outcome)
    facts = outcome.facts
    assert_operator facts[:drained], :<, facts[:closed], "DRAIN before the listeners close"
    assert_equal ["UP", "DRAIN (agent)"], outcome.states_of("app3").first(2)
    assert_equal 0, outcome.answered_by_after(3, facts[:drained_at]), "no request reached app3 once drained"
    assert_operator outcome.answered_by_after(3, 0), :>, 0, "app3 served before"
  end
end
