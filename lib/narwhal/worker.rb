# frozen_string_literal: true

require "etc"

module Narwhal
  # A worker as the master and the hooks see it (Unicorn's Worker): its
  # number `nr`, its pid once forked, and `user` for dropping privileges in
  # after_fork.
  #
  # A worker forked to replace one that grew too big or too old
  # (Master::Recycler) gets a spare number of its own (its predecessor
  # keeps its number, and its scoreboard slot, until it exits) and holds
  # its predecessor's `place` from then on.
  class Worker
    attr_reader :nr
    # quitting: sent QUIT; killed: sent KILL for its timeout; recycling:
    # to be replaced (Master::Recycler); ready: reported that it serves;
    # stand_in_for: the place it took; threads: its request threads
    # (`threads` when it was forked: a HUP changes it for the workers forked
    # after it).
    attr_accessor :pid, :quitting, :killed, :recycling, :ready, :stand_in_for, :threads

    def initialize(nr)
      @nr = nr
      @pid = nil
      @switched = false
      @quitting = false
      @killed = false
      @recycling = false
      @ready = false
      @stand_in_for = nil
      @threads = 1
    end

    alias number nr

    # Which of the master's worker_processes places (0...count) it fills.
    def place
      @stand_in_for || @nr
    end

    def ==(other)
      other.is_a?(Worker) ? nr == other.nr : nr == other
    end

    def switched?
      @switched
    end

    # Changes this worker process's user and group (from after_fork, as in
    # Unicorn). Log files are chowned first so that USR1 still reopens them.
    def user(user, group = nil, chroot = false, log_paths: [])
      uid = Etc.getpwnam(user).uid
      gid = group ? Etc.getgrnam(group).gid : Etc.getpwnam(user).gid
      System::LogReopener.chown_all(uid, gid, log_paths)
      if gid != Process.egid
        Process.initgroups(user, gid)
        Process::GID.change_privilege(gid)
      end
      if chroot
        dir = chroot == true ? Dir.pwd : chroot
        Dir.chroot(dir)
        Dir.chdir("/")
      end
      Process::UID.change_privilege(uid) if uid != Process.euid
      @switched = true
    end
  end
end
