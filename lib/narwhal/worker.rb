# frozen_string_literal: true

require "etc"

module Narwhal
  # A worker as the master and the hooks see it (Unicorn's Worker): its
  # number `nr`, its pid once forked, and `user` for dropping privileges in
  # after_fork.
  class Worker
    attr_reader :nr
    attr_accessor :pid, :quitting

    def initialize(nr)
      @nr = nr
      @pid = nil
      @switched = false
      @quitting = false
    end

    alias number nr

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
      LogReopener.chown_all(uid, gid, log_paths)
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
