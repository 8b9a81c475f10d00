# A NixOS module: /run/opengl-driver made at boot by `cuda-patchelf link-driver`, which links the NVIDIA
# driver's libraries and, in front of them, the newest cuda_compat package that NVIDIA's rule allows on
# the kernel driver that is loaded (its branch among those the compat libcuda's note lists, and compat
# newer). Packages are built with the driver hook only, and compat is chosen where they run, not fixed
# in their runpaths at build time (docs/driver-link.md).
#
#   imports = [ ./nix/link-driver.nix ];
#   services.cuda-patchelf-link-driver = {
#     enable = true;
#     cudaCompat = [ pkgs.cudaPackages.cuda_compat ];
#   };
#
# The link takes the place of the one NixOS' graphics module makes (a tmpfiles rule linking
# /run/opengl-driver to its buildEnv of drivers): that environment is kept in it (--base), under the
# driver's and cuda_compat's libraries. The unit runs again when the driver or a compat package changes
# (a new command line: switch-to-configuration restarts it), and at every boot.
{
  config,
  lib,
  pkgs,
  ...
}:

let
  cfg = config.services.cuda-patchelf-link-driver;
  graphics = config.hardware.graphics;
  # What nixos/modules/hardware/graphics.nix links /run/opengl-driver to: the same buildEnv.
  driversEnv = pkgs.buildEnv {
    name = "graphics-drivers";
    paths = [
      graphics.package
      pkgs.libGL
    ]
    ++ graphics.extraPackages;
  };
  arguments = [
    "--from"
    "${cfg.driver}/lib"
  ]
  ++ lib.optionals graphics.enable [
    "--base"
    "${driversEnv}"
  ]
  ++ lib.concatMap (compat: [
    "--cuda-compat"
    "${compat}"
  ]) cfg.cudaCompat
  ++ cfg.extraArgs
  ++ [ cfg.driverLink ];
in
{
  options.services.cuda-patchelf-link-driver = {
    enable = lib.mkEnableOption "the driver link made at boot by cuda-patchelf link-driver, with cuda_compat where NVIDIA's rule allows it";

    package = lib.mkOption {
      type = lib.types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = lib.literalExpression "pkgs.callPackage ./package.nix { }";
      description = "The cuda-patchelf package whose link-driver makes the link.";
    };

    driver = lib.mkOption {
      type = lib.types.package;
      default = config.hardware.nvidia.package;
      defaultText = lib.literalExpression "config.hardware.nvidia.package";
      description = "The NVIDIA driver package: its lib/ holds libcuda.so.X.Y.Z and the other libraries of its release.";
    };

    cudaCompat = lib.mkOption {
      type = lib.types.listOf (lib.types.either lib.types.package lib.types.path);
      default = [ ];
      example = lib.literalExpression "[ pkgs.cudaPackages.cuda_compat ]";
      description = ''
        cuda_compat packages (each holding compat/libcuda.so.X.Y.Z) to weigh at boot: the newest that
        NVIDIA's rule allows on the loaded kernel driver goes in front of the driver's libraries; none
        when none is allowed.
      '';
    };

    driverLink = lib.mkOption {
      type = lib.types.str;
      default = "/run/opengl-driver";
      description = "The driver link to make (addDriverRunpath.driverLink: what the driver hook writes into runpaths, with /lib).";
    };

    extraArgs = lib.mkOption {
      type = lib.types.listOf lib.types.str;
      default = [ ];
      example = [ "--driver-version" "580.159.04" ];
      description = "More arguments for cuda-patchelf link-driver.";
    };
  };

  config = lib.mkIf cfg.enable {
    # The graphics module's rule would put its plain environment back whenever tmpfiles runs again.
    systemd.tmpfiles.settings.graphics-driver.${cfg.driverLink} = lib.mkForce { };

    systemd.services.cuda-patchelf-link-driver = {
      description = "NVIDIA driver link ${cfg.driverLink} (cuda-patchelf link-driver)";
      wantedBy = [ "multi-user.target" ];
      before = [
        "multi-user.target"
        "display-manager.service"
      ];
      # The kernel driver's version is read from its module, loaded by then.
      after = [
        "systemd-modules-load.service"
        "systemd-tmpfiles-setup.service"
      ];
      restartIfChanged = true;
      serviceConfig = {
        Type = "oneshot";
        RemainAfterExit = true;
      };
      script = "exec ${lib.getExe cfg.package} link-driver ${lib.escapeShellArgs arguments}";
    };
  };
}
