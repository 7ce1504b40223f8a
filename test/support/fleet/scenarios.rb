# frozen_string_literal: true

require_relative "outcome"

module Narwhal
  class Fleet
    # The events a fleet must ride through, each while steady load runs
    # through haproxy: a rolling USR2 deploy, a deploy that cannot boot, a
    # request stuck past `timeout`, an overload, a graceful TERM. Each
    # returns an Outcome; test/integration/fleet_test.rb judges it and
    # bench/fleet.rb reports it.
    module Scenarios
      RATE = 100 # requests a second of the steady load
      READY = /worker=\d+ ready pid=\d+/
      TIMEOUT = 2 # narwhal's `timeout`, for the stuck request

      # Each event's config lines for every instance, its workers each and
      # how long the app takes to load (the master's, preload_app).
      BASE = "preload_app true\nworker_processes 2\ntimeout #{TIMEOUT}\n"
      UPGRADES = %(upgrade_timeout 20\nupgrade_health_path "/up"\nupgrade_retire_old true\n)
      CONFIGS = {
        # a release that loads in 0.5 s: both generations serve meanwhile
        rolling_deploy: { config: BASE + UPGRADES, workers: 2, boot: 0.5 },
        broken_deploy: { config: BASE + UPGRADES, workers: 2 },
        stuck_request: { config: BASE, workers: 2 },
        # 1 worker of 1 thread each, 20 ms a request: about 150 a second for the fleet
        overload: { config: "preload_app true\nworker_processes 1\nthreads 1\nqueue_deadline 1\n", workers: 1 },
        # drain_delay: 5 x the agent-inter Fleet gives haproxy
        graceful_term: { config: "#{BASE}term_graceful true\ndrain_delay 1\n", workers: 2 }
      }.freeze

      module_function

      # A fleet configured for `event` (a key of CONFIGS), not started yet.
      def fleet_for(event)
        setup = CONFIGS.fetch(event)
        Fleet.new(config: setup[:config], workers: setup[:workers],
                  env: { "FLEET_BOOT_SECONDS" => setup.fetch(:boot, 0).to_s })
      end

      # USR2 to each instance in turn, the next once the one before has its
      # new master, its old master is gone (upgrade_retire_old) and `between`
      # more requests were answered. facts: seconds each deploy took, the
      # versions each instance answered with at the end.
      def rolling_deploy(fleet, version: "2", rate: RATE, between: 30)
        steady(fleet, rate) do |load|
          seconds = fleet.instances.map do |instance|
            upgrade(instance, version).tap { answers(load, load.answers + between) }
          end
          { seconds: seconds, versions: fleet.versions }
        end
      end

      # On one instance a release that raises at load, then one whose
      # /up answers 500. facts: per release the seconds to the verdict and
      # the old master's line; the pid file's master against the first; the
      # versions the instance answered with afterwards.
      def broken_deploy(fleet, number: 2, rate: RATE)
        instance = fleet[number]
        first = instance.master
        steady(fleet, rate) do
          releases = %w[raises unhealthy].to_h { |version| [version, refused_upgrade(instance, version)] }
          { releases: releases, first_master: first, master: instance.master,
            oldbin: File.exist?("#{instance.pid_path}.oldbin"), versions: fleet.versions(count: 45)[number] }
        end
      end

      # /stuck never returns on instance `number`: asked through haproxy
      # until it lands there (the others answer at once). facts: its
      # status, its connection header, how long it took, the tries the
      # other instances answered, the master's kill line, and when.
      def stuck_request(fleet, number: 2, rate: RATE, tries: 15)
        instance = fleet[number]
        File.write(File.join(instance.dir, "STUCK"), "")
        steady(fleet, rate) do
          ready = instance.log.scan(READY).size
          elsewhere, answer, seconds = stuck_get(fleet, number, tries)
          Fleet.wait_until(15, "a new worker on #{instance.name}\n#{instance.log}") do
            instance.log.scan(READY).size > ready
          end
          { status: answer.status, connection: answer.head.to_s[/^connection: *(\S+)/i, 1], seconds: seconds,
            elsewhere: elsewhere, kill_line: instance.log[/timeout \(.*killing.*$/], answered_at: Fleet.now }
        end
      end

      # Open-loop load at `rate` for `seconds` on /work/MS (MS milliseconds
      # each): the results are the overload's own requests.
      def overload(fleet, rate:, seconds: 3, work_ms: 20)
        load = fleet.load(rate: rate, count: (rate * seconds).round, path: "/work/#{work_ms}", answer_timeout: 30)
        results = nil
        samples = fleet.haproxy.watch { results = load.run }
        Outcome.new(results, { rate: rate, seconds: seconds }, samples)
      end

      # TERM to instance `number` (term_graceful). facts: seconds from the
      # TERM to haproxy showing DRAIN, to `drain_delay over` (the listeners
      # close), to the master's exit; when haproxy showed DRAIN.
      def graceful_term(fleet, number: 3, rate: RATE)
        instance = fleet[number]
        steady(fleet, rate) do
          master = instance.master
          term = Fleet.now
          instance.signal(:TERM, master)
          drained = Fleet.wait_until(10, "haproxy to drain #{instance.name}") do
            fleet.haproxy.states[instance.name].start_with?("DRAIN") && Fleet.now
          end
          closed = Fleet.wait_until(15, "drain_delay over\n#{instance.log}") do
            instance.log.include?("drain_delay over") && Fleet.now
          end
          Fleet.wait_until(20, "#{instance.name}'s master to exit\n#{instance.log}") { !Instance.alive?(master) }
          { drained: drained - term, closed: closed - term, exited: Fleet.now - term, drained_at: drained }
        end
      end

      # Runs the block under load at `rate` (given to it), `before` answers
      # after the load started and until `after` more came once it
      # returned; haproxy watched throughout. The block's value is the
      # outcome's facts.
      def steady(fleet, rate, before: 20, after: 20)
        load = fleet.load(rate: rate).start
        facts = nil
        samples = fleet.haproxy.watch do
          answers(load, before)
          facts = yield load
          answers(load, load.answers + after)
        end
        outcome = Outcome.new(load.stop, facts, samples)
      ensure
        load&.stop unless outcome # its threads end either way
      end

      def answers(load, count)
        Fleet.wait_until(30, "#{count} answers through haproxy") { load.answers >= count }
      end

      # One USR2 with upgrade_retire_old: seconds until the old master left.
      def upgrade(instance, version)
        started = Fleet.now
        old = instance.master
        instance.deploy(version)
        instance.signal(:USR2, old)
        Fleet.wait_until(30, "a new master in #{instance.name}'s pid file\n#{instance.log}") do
          (pid = instance.master) && pid != old
        end
        Fleet.wait_until(30, "#{instance.name}'s old master pid=#{old} to retire\n#{instance.log}") do
          !Instance.alive?(old)
        end
        Fleet.now - started
      end

      # One USR2 of a release that cannot serve: the seconds until the old
      # master took its pid file back, and its verdict (`upgrade failed: ...`).
      def refused_upgrade(instance, version)
        started = Fleet.now
        old = instance.master
        known = instance.successors.size
        instance.deploy(version)
        instance.signal(:USR2, old)
        successor = Fleet.wait_until(15, "#{instance.name}'s new master") { instance.successors[known] }
        verdict = /upgrade failed: the new master pid=#{successor} .*/
        Fleet.wait_until(30, "#{instance.name}'s new master pid=#{successor} to give up\n#{instance.log}") do
          instance.log.include?("re-exec pid=#{successor} died") && instance.log.match?(verdict)
        end
        Fleet.wait_until(5, "#{instance.name}'s pid file back") { instance.master == old }
        { seconds: Fleet.now - started, line: instance.log[verdict] }
      end

      # GET /stuck until instance `number` takes one: [instances that
      # answered before, its answer, seconds it took].
      def stuck_get(fleet, number, tries)
        elsewhere = []
        tries.times do
          started = Fleet.now
          answer = fleet.get("/stuck", timeout: 20)
          return [elsewhere, answer, Fleet.now - started] unless answer.status == 200 && answer["instance"] != number.to_s

          elsewhere << Integer(answer["instance"])
        end
        raise "#{tries} GET /stuck through haproxy and none reached app#{number}: #{elsewhere}"
      end
    end
  end
end
