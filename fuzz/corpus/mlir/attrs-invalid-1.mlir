sd.mesh @mesh = <[""=2]>
